// Package natscluster writes the configuration of a JetStream cluster on loopback, for the
// tests and load tests that run one (three bin/nats-server that trust the edge's authority).
package natscluster

import (
	"fmt"
	"strings"
)

// Node is one node's addresses (host:port each).
type Node struct {
	Name, Client, HTTP, Route string
}

// Options are what every node shares.
type Options struct {
	Include  string // a file to include (edge nats-config's output), relative to the config file
	TLSCert  string // client TLS, with TLSKey ("": none)
	TLSKey   string
	StoreDir func(Node) string // a node's JetStream store
}

// Config is the configuration of node n of the cluster nodes (one node: a standalone server): its listeners, the included
// auth, client TLS, JetStream, and routes to every node with route authorization and
// no_advertise (clients use the URLs they are given, so a test can put a proxy in between).
func Config(n Node, nodes []Node, o Options) string {
	var routes []string
	for _, r := range nodes {
		routes = append(routes, "nats-route://route:route-secret@"+r.Route)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %s\nlisten: %s\nhttp: %s\n", n.Name, n.Client, n.HTTP)
	if o.Include != "" {
		fmt.Fprintf(&b, "include %q\n", o.Include)
	}
	if o.TLSCert != "" {
		fmt.Fprintf(&b, "tls { cert_file: %q, key_file: %q }\n", o.TLSCert, o.TLSKey)
	}
	fmt.Fprintf(&b, "jetstream { store_dir: %q }\n", o.StoreDir(n))
	if len(nodes) == 1 {
		return b.String() // one server: no cluster
	}
	fmt.Fprintf(&b, "cluster {\n  name: spookat\n  listen: %s\n  no_advertise: true\n", n.Route)
	b.WriteString("  authorization { user: route, password: route-secret }\n")
	fmt.Fprintf(&b, "  routes: [\n    %s\n  ]\n}\n", strings.Join(routes, "\n    "))
	return b.String()
}
