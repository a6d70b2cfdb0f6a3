package broker_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"spookat/edge/internal/broker"
	"spookat/edge/internal/edgetest"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
)

// start runs a broker on a fresh data directory with opts; opts.Auth is filled in.
func start(t *testing.T, opts *broker.Options) (*broker.Broker, error) {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	requireNoErr(t, err)
	opts.DataDir, opts.Auth = dir, auth
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	br, err := broker.Start(ctx, *opts)
	if err == nil {
		t.Cleanup(br.Close)
	}
	return br, err
}

// Beyond loopback the embedded server speaks TLS or does not start, and says what to pass.
func TestNATSBeyondLoopbackNeedsTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts broker.Options
		want string // in the error; "" to start
	}{
		{"any interface without TLS", broker.Options{Listen: "0.0.0.0:0"}, "pass -nats-tls-cert and -nats-tls-key"},
		{"a public monitor", broker.Options{Listen: "127.0.0.1:0", Monitor: "0.0.0.0:0"}, "keep it on 127.0.0.1"},
		{"a client CA without a certificate", broker.Options{Listen: "127.0.0.1:0", TLS: broker.TLS{ClientCA: "ca.pem"}}, "needs its own certificate"},
		// The CA that verifies a server, given to the embedded one by mistake, would lock every
		// worker out: refused, naming the flag meant.
		{"the verifying CA on the embedded server", broker.Options{Listen: "127.0.0.1:0", TLS: broker.TLS{Cert: "c.pem", Key: "k.pem", CA: "ca.pem"}}, "-nats-client-ca"},
		{"the lab opt-out", broker.Options{Listen: "0.0.0.0:0", Insecure: true}, ""},
		{"loopback", broker.Options{Listen: "127.0.0.1:0", Monitor: "127.0.0.1:0"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := start(t, &tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("did not start: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// With a certificate, clients must speak TLS and trust its CA; credentials are still needed.
func TestNATSOverTLS(t *testing.T) {
	files := edgetest.NewTLS(t, t.TempDir())
	addr := edgetest.FreePort(t)
	_, port, _ := strings.Cut(addr, ":")
	var mu sync.Mutex
	refused := map[string]int{}
	var logs bytes.Buffer
	opts := broker.Options{Listen: "0.0.0.0:" + port, TLS: broker.TLS{Cert: files.Cert, Key: files.Key},
		Log:     slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil)),
		Refused: func(reason string) { mu.Lock(); refused[reason]++; mu.Unlock() }}
	_, err := start(t, &opts)
	requireNoErr(t, err) // the edge's own connection is in-process: no TLS needed
	url := "nats://127.0.0.1:" + port
	worker, err := opts.Auth.Issue(schema.RoleWorker, "w1")
	requireNoErr(t, err)
	for _, tc := range []struct {
		name string
		opts []nats.Option
		ok   bool
	}{
		{"plain TCP", worker.Options(), false},
		{"a server its CA did not sign", append(worker.Options(), nats.RootCAs(edgetest.NewTLS(t, t.TempDir()).CA)), false},
		{"TLS without credentials", []nats.Option{nats.RootCAs(files.CA)}, false},
		{"TLS and a worker's credentials", append(worker.Options(), nats.RootCAs(files.CA)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(url, append(tc.opts, nats.MaxReconnects(0))...)
			if tc.ok {
				requireNoErr(t, err)
				defer nc.Close()
				if !nc.TLSRequired() {
					t.Fatal("connected without TLS")
				}
				if _, err := nc.TLSConnectionState(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if tc.name == "TLS without credentials" && !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("err = %v, want an authorization violation", err)
			}
		})
	}
	// The edge saw each refusal: counted by reason, and a line naming the client's address.
	testkit.WaitFor(t, "the refusals counted", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused["credentials"] >= 1 && refused["tls"] >= 1 && strings.Contains(logs.String(), "client=127.0.0.1")
	})
}

// lockedWriter is a log sink the server's goroutines and the test share.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// An external NATS that asks for no credentials would let anyone read every job: the edge
// refuses it unless told it is a lab.
func TestExternalNATSWithoutAuthRefused(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	requireNoErr(t, err)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	_, err = start(t, &broker.Options{URL: srv.ClientURL()})
	if err == nil || !strings.Contains(err.Error(), "accepts clients without credentials") {
		t.Fatalf("err = %v, want a refusal naming the problem", err)
	}
	if _, err := start(t, &broker.Options{URL: srv.ClientURL(), Insecure: true}); err != nil {
		t.Fatalf("with -nats-insecure: %v", err)
	}
}
