// Package broker starts the embedded NATS JetStream server (or connects to an external one)
// and creates the streams every other part relies on.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// Options say where NATS is.
type Options struct {
	Listen   string // embedded server's client address, e.g. 127.0.0.1:4222
	Monitor  string // embedded server's HTTP monitor address; "" for none
	URL      string // external NATS; when set nothing is embedded
	DataDir  string // JetStream store goes under DataDir/nats
	Replicas int    // stream replicas (1 on one box)
}

// Broker is a NATS connection for the edge, with the embedded server when there is one.
type Broker struct {
	srv    *server.Server // nil with an external NATS
	opts   Options
	NC     *nats.Conn
	closed chan struct{} // closed when NC is closed
}

// Start embeds or connects, then creates or updates the streams and buckets.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	b := &Broker{opts: opts, closed: make(chan struct{})}
	if opts.URL == "" {
		if err := b.embed(); err != nil {
			return nil, err
		}
	}
	nc, err := b.Connect("spookat-edge", nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }))
	if err != nil {
		b.Close()
		return nil, err
	}
	b.NC = nc
	js, err := jetstream.New(nc)
	if err != nil {
		b.Close()
		return nil, err
	}
	replicas := max(opts.Replicas, 1)
	if err := schema.EnsureStreams(ctx, js, replicas); err != nil {
		b.Close()
		return nil, fmt.Errorf("create streams: %w", err)
	}
	return b, nil
}

func (b *Broker) embed() error {
	host, port, err := splitHostPort(b.opts.Listen, 4222)
	if err != nil {
		return fmt.Errorf("-nats-listen: %w", err)
	}
	o := &server.Options{
		ServerName: "spookat-edge",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(b.opts.DataDir, "nats"),
		NoSigs:     true, // the edge handles signals
		NoLog:      true,
		MaxPayload: 1 << 20,
	}
	if b.opts.Monitor != "" {
		if o.HTTPHost, o.HTTPPort, err = splitHostPort(b.opts.Monitor, 8222); err != nil {
			return fmt.Errorf("-nats-monitor: %w", err)
		}
	}
	if port > 0 { // say plainly when the port is taken, rather than time out below
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("embedded NATS cannot listen on -nats-listen %s:%d: %w", host, port, err)
		}
		ln.Close()
	}
	// Port 0 asks for any free port (nats-server spells it -1; its 0 means 4222).
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	if b.opts.Monitor != "" && o.HTTPPort == 0 {
		o.HTTPPort = server.RANDOM_PORT
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return errors.New("embedded NATS did not start within 10s (is the port in use? see -nats-listen)")
	}
	b.srv = srv
	return nil
}

// Connect opens a new connection: in-process to the embedded server (no TCP), or to the
// external URL.
func (b *Broker) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, extra...)
	if b.srv != nil {
		opts = append(opts, nats.InProcessServer(b.srv))
		return nats.Connect("", opts...)
	}
	return nats.Connect(b.opts.URL, opts...)
}

// Embedded reports whether the NATS server runs inside this process.
func (b *Broker) Embedded() bool { return b.srv != nil }

// ClientURL is the URL other processes (workers, the nats CLI) use.
func (b *Broker) ClientURL() string {
	if b.srv != nil {
		return b.srv.ClientURL()
	}
	return b.opts.URL
}

// Ready reports whether the connection is up.
func (b *Broker) Ready() bool { return b.NC != nil && b.NC.IsConnected() }

// Close drains the connection and shuts the embedded server down.
func (b *Broker) Close() {
	if b.NC != nil {
		if b.NC.Drain() == nil {
			select {
			case <-b.closed:
			case <-time.After(5 * time.Second):
				b.NC.Close()
			}
		}
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
}

func splitHostPort(addr string, defPort int) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", defPort, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", 0, err
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}
