package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/schema/testkit"
)

// An edge whose HTTP server stops on its own returns the cause, so that the process exits
// non-zero and a supervisor restarts it; the log does not claim a stop of an edge that never
// started.
func TestRunReturnsWhenServingFails(t *testing.T) {
	t.Run("serving fails", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		testkit.NoErr(t, err)
		ready := make(chan server.Addrs, 1)
		cfg := server.Config{DataDir: t.TempDir(), Listener: ln, NATSListen: edgetest.FreePort(t),
			NATSMonitor: "", Ready: func(a server.Addrs) { ready <- a }}
		done := make(chan error, 1)
		go func() { done <- server.Run(context.Background(), cfg, slog.New(slog.DiscardHandler)) }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("edge did not start: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("edge did not start within 20s")
		}
		ln.Close()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "-addr "+ln.Addr().String()) {
				t.Fatalf("Run returned %v, want an error naming -addr %s", err, ln.Addr())
			}
		case <-time.After(server.DefaultStopTimeout + 5*time.Second):
			t.Fatal("Run did not return after its HTTP server stopped")
		}
	})
	t.Run("start fails", func(t *testing.T) {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		testkit.NoErr(t, err)
		defer busy.Close()
		var logs bytes.Buffer
		cfg := server.Config{DataDir: t.TempDir(), Addr: "127.0.0.1:0", NATSListen: edgetest.FreePort(t), MetricsAddr: busy.Addr().String()}
		err = server.Run(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err == nil || !strings.Contains(err.Error(), "SPOOKAT_METRICS_ADDR") {
			t.Errorf("Run = %v, want the bind error to name -metrics-addr's environment variable", err)
		}
		if strings.Contains(logs.String(), "edge stopped") {
			t.Errorf("an edge that never started logged its stop:\n%s", logs.String())
		}
	})
}
