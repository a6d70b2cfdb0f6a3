// Package faults holds the edge's fault suite: real bin/edge processes (and bin/nats-server,
// bin/worker) put through what the world does to them, such as running out of file
// descriptors, a target that never answers during a stop, a full disk, NATS going away, Slack
// down for minutes, and a reconnect storm, each checked by counting what was acked.
//
// The tests need the built binaries ($SPOOKAT_BIN, set by `make test`) and skip loudly
// without them.
package faults
