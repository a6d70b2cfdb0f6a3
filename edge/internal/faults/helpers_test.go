package faults

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"spookat/edge/internal/edgetest"
)

// limited writes a wrapper that starts bin with at most fds open files (soft and hard), as
// a box whose `ulimit -n` is that low would. exec keeps the pid, so signals reach the edge.
func limited(t *testing.T, bin string, fds int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge-limited")
	script := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %s \"$@\"\n", fds, bin)
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// hangingSlack is a Slack Web API that takes every request and never answers until released.
type hangingSlack struct {
	mu       sync.Mutex
	received int
	release  chan struct{}
}

func newHangingSlack() *hangingSlack { return &hangingSlack{release: make(chan struct{})} }

func (h *hangingSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.received++
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	http.Error(w, "released", http.StatusServiceUnavailable)
}

func (h *hangingSlack) Received() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.received
}

// metric reads a series of a subprocess edge, failing the test when it is missing.
func metric(t *testing.T, p *edgetest.Proc, series string) float64 {
	t.Helper()
	v, ok := edgetest.Metric(p.MetricsAddr, series)
	if !ok {
		t.Fatalf("%s missing from %s/metrics", series, p.MetricsAddr)
	}
	return v
}
