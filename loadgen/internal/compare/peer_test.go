package compare

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"spookat/loadgen/internal/stairs"
	"spookat/schema/testkit"
)

// The Bun peer from ../shared/peers (or SPOOKAT_PEER_DIR) is installed, seeded, started and
// measured as a setup of its own, the same way the edge's are.
func TestPeerSetupRunsTheBunPeer(t *testing.T) {
	src := os.Getenv("SPOOKAT_PEER_DIR")
	if src == "" {
		src, _ = filepath.Abs("../../../../shared/peers/bun-sqlite")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := filepath.Join(os.TempDir(), "spookat-peer-test") // kept: npm install once per machine
	peer := BunPeer(ctx, src, work, testLog{t})
	if peer.Skip != "" {
		t.Skip("SKIPPED: " + peer.Skip)
	}
	rep, err := Compare(ctx, Config{
		Setups: []string{"peer+group"}, Dir: t.TempDir(), Sites: 20, Peer: peer, Log: testLog{t},
		Run: stairs.Config{Sockets: 40, Stairs: []float64{400}, Step: 3 * time.Second, Warmup: time.Second, Drain: 5 * time.Second},
	})
	testkit.NoErr(t, err)
	if len(rep.Results) != 1 || rep.Results[0].Report == nil {
		t.Fatalf("no result: %+v", rep.Results)
	}
	res := rep.Results[0]
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	r := res.Report
	if r.Acked != r.Sent || r.Acked < 800 || len(r.Errors) > 0 {
		t.Fatalf("sent %d, acked %d, errors %v", r.Sent, r.Acked, r.Errors)
	}
	p := proc0(r.Stairs[0], "edge")
	if p == nil || p.Name != "peer" || p.CPUMicrosPerMsg == nil || *p.CPUMicrosPerMsg <= 0 || p.RSSPeakMB <= 0 {
		t.Fatalf("no CPU and RSS figures of the peer process: %+v", r.Stairs[0].Procs)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) { l.t.Logf("%s", b); return len(b), nil }
