package broker

import (
	"context"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StoreCheckEvery is how often WatchStore looks at the embedded JetStream store.
const StoreCheckEvery = 2 * time.Second

// minFreeToRestart is the free disk under the store that WatchStore waits for before it
// restarts JetStream: room for a few job blocks, so the restart is not straight back into
// the same error.
const minFreeToRestart = 16 << 20

// WatchStore keeps the embedded JetStream writable. A stream that once failed a write (the
// disk filled up) refuses every later write, and never answers the publishes, until the stream
// is loaded again; nats-server does that only on a restart. So, every StoreCheckEvery until
// ctx ends: when a stream reports a write error (or JetStream switched itself off) and there
// is room again on the disk, JetStream is restarted on the same store, and then onRestart
// runs (it provisions what lives in memory: the job consumers and WORKERS). It does nothing
// for an external NATS, whose operator restarts it (see the runbook).
func (b *Broker) WatchStore(ctx context.Context, onRestart func()) {
	if b.srv == nil {
		return
	}
	t := time.NewTicker(StoreCheckEvery)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		broken := b.storeError()
		if broken == "" {
			waiting = false
			continue
		}
		free, err := freeBytes(b.srv.StoreDir())
		if err != nil || free < minFreeToRestart {
			if !waiting {
				b.opts.Log.Error("JetStream cannot write its store; waiting for free disk to restart it (visitors are still acked; jobs wait in SQLite)",
					"problem", broken, "free_bytes", free, "need_bytes", minFreeToRestart)
				waiting = true
			}
			continue
		}
		waiting = false
		b.opts.Log.Warn("JetStream cannot write its store; restarting it on the same store", "problem", broken, "free_bytes", free)
		if err := b.restartJetStream(); err != nil {
			b.opts.Log.Error("restart JetStream", "err", err)
			continue
		}
		b.opts.Log.Info("JetStream restarted")
		onRestart()
	}
}

// storeError says what is wrong with the embedded store ("": nothing).
func (b *Broker) storeError() string {
	if !b.srv.JetStreamEnabled() {
		return "JetStream is disabled"
	}
	h := b.srv.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range h.Errors {
		if strings.Contains(e.Error, "write error") {
			return e.Error
		}
	}
	return ""
}

// restartJetStream stops JetStream (keeping its files) and starts it again with the
// configuration it was started with, which reloads every stream from disk.
func (b *Broker) restartJetStream() error {
	if b.srv.JetStreamEnabled() {
		if err := b.srv.ShutdownJetStream(); err != nil {
			return err
		}
	}
	o := b.srvOpts
	return b.srv.EnableJetStream(&server.JetStreamConfig{
		StoreDir:     o.StoreDir,
		SyncInterval: o.SyncInterval,
		SyncAlways:   o.SyncAlways,
		Strict:       !o.NoJetStreamStrict,
		MaxMemory:    o.JetStreamMaxMemory,
		MaxStore:     o.JetStreamMaxStore,
		Domain:       o.JetStreamDomain,
		CompressOK:   true,
		UniqueTag:    o.JetStreamUniqueTag,
	})
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
