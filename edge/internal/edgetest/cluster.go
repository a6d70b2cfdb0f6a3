package edgetest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"spookat/loadgen/natscluster"
)

// NATSNode is one bin/nats-server of a test cluster, with its configuration file and store
// on disk, so it can be SIGKILLed and started again on the same state.
type NATSNode struct {
	*process
	Name       string
	ClientAddr string // host:port of its client listener
	HTTPAddr   string // its monitoring listener
	bin, conf  string
	t          testing.TB
	starts     int
}

// ClusterOptions shape a test cluster.
type ClusterOptions struct {
	Nodes    int    // 3 unless set
	AuthConf string // a file to include (edge nats-config's output)
	TLS      *TLSFiles
}

// StartCluster writes one configuration per node under dir (client, route and monitor ports
// on loopback, route authorization, JetStream store, `no_advertise` so clients only use the
// URLs they were given) and starts every node. It returns once every node reports healthy.
func StartCluster(t testing.TB, bin, dir string, o ClusterOptions) []*NATSNode {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	nodes := make([]*NATSNode, o.Nodes)
	addrs := make([]natscluster.Node, o.Nodes)
	for i := range nodes {
		nodes[i] = &NATSNode{Name: fmt.Sprintf("n%d", i+1), ClientAddr: FreePort(t), HTTPAddr: FreePort(t), bin: bin, t: t}
		addrs[i] = natscluster.Node{Name: nodes[i].Name, Client: nodes[i].ClientAddr, HTTP: nodes[i].HTTPAddr, Route: FreePort(t)}
	}
	co := natscluster.Options{StoreDir: func(n natscluster.Node) string { return filepath.Join(dir, n.Name) }}
	if o.AuthConf != "" {
		rel, err := filepath.Rel(dir, o.AuthConf) // include paths are relative to the file
		if err != nil {
			t.Fatal(err)
		}
		co.Include = rel
	}
	if o.TLS != nil {
		co.TLSCert, co.TLSKey = o.TLS.Cert, o.TLS.Key
	}
	for i, n := range nodes {
		n.conf = filepath.Join(dir, n.Name+".conf")
		if err := os.WriteFile(n.conf, []byte(natscluster.Config(addrs[i], addrs, co)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		n.Start()
	}
	for _, n := range nodes {
		n.WaitHealthy(60 * time.Second)
	}
	return nodes
}

// Start starts the node (again) on its configuration and store.
func (n *NATSNode) Start() {
	n.t.Helper()
	n.starts++
	n.process = startProcess(n.t, "nats-server "+n.Name, filepath.Join(filepath.Dir(n.conf), fmt.Sprintf("%s-%d.log", n.Name, n.starts)), n.bin, "-c", n.conf)
}

// WaitHealthy waits for the node's /healthz (JetStream current with the cluster) to say ok.
func (n *NATSNode) WaitHealthy(timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		if n.Exited() {
			n.t.Fatalf("nats-server %s exited: %v\n%s", n.Name, n.exitErr, n.Log())
		}
		resp, err := http.Get("http://" + n.HTTPAddr + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = string(body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			log := n.Log()
			n.t.Fatalf("nats-server %s not healthy after %s: %s\n…%s", n.Name, timeout, last, log[max(0, len(log)-3000):])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is the node's client URL.
func (n *NATSNode) URL() string { return "nats://" + n.ClientAddr }

// Proxy forwards TCP connections to a target; Cut drops every connection and refuses new
// ones until Restore: a network cut between one client and its server.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port; it stops at the end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// Cut closes every forwarded connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
