package main

import (
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/schema/testkit"
)

// Issue 30, second host, point 4: a worker whose credentials are revoked while it runs stops
// with a sentence and a non-zero exit (a supervisor restarts it, and its log says why),
// instead of running on without a connection.
func TestRevokedWorkerStops(t *testing.T) {
	bin, wbin := edgetest.Bin(t, "edge"), edgetest.Bin(t, "worker")
	dir := t.TempDir()
	p := edgetest.StartProc(t, bin, dir, "-worker", "none")
	creds := edgetest.Creds(t, bin, dir, "worker", "w1")
	w := edgetest.StartWorker(t, wbin, dir, "w1", "-nats-url", "nats://"+p.NATSAddr, "-nats-creds", creds, "-stop-timeout", "2s")
	testkit.WaitFor(t, "the worker to start", 20*time.Second, func() bool { return strings.Contains(w.Log(), "worker started") })
	edgetest.Admin(t, bin, dir, "creds", "revoke", "-id", "w1")
	testkit.WaitFor(t, "the revoked worker to exit", 20*time.Second, w.Exited)
	if err := w.ExitErr(); err == nil {
		t.Fatalf("the revoked worker exited 0:\n%s", w.Log())
	}
	if !strings.Contains(w.Log(), "no longer takes") || !strings.Contains(w.Log(), "edge creds worker -id w1") {
		t.Fatalf("the revoked worker's last words do not say why:\n%s", w.Log())
	}
}
