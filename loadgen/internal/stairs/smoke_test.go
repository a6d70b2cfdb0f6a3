package stairs_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"

	"spookat/loadgen/internal/proc"
	"spookat/loadgen/internal/stairs"
	"spookat/schema/testkit"
)

// edgeBinary is $SPOOKAT_BIN/edge. Without SPOOKAT_BIN the test is skipped; with it (make
// test sets it after building) a missing binary is a failure, not a skip.
func edgeBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SPOOKAT_BIN")
	if dir == "" {
		t.Skip("SPOOKAT_BIN is not set (make test sets it after building bin/edge)")
	}
	bin := filepath.Join(dir, "edge")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("SPOOKAT_BIN=%s but the edge binary is missing: %v (run make build)", dir, err)
	}
	return bin
}

// TestSmokeRunAgainstRealEdge: a 2-stair run of a few seconds each against a real edge
// produces a report whose acked count equals the rows in SQLite.
func TestSmokeRunAgainstRealEdge(t *testing.T) {
	bin := edgeBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	data := t.TempDir()
	var addrs [4]string
	for i := range addrs {
		a, err := proc.FreeAddr()
		testkit.NoErr(t, err)
		addrs[i] = a
	}
	var out bytes.Buffer
	edge, _, err := proc.Start("edge", &syncWriter{b: &out}, "", bin,
		"-addr", addrs[0], "-nats-listen", addrs[1], "-nats-monitor", addrs[2], "-metrics-addr", addrs[3], "-data", data,
		"-conn-msg-rate", "1e6", "-conn-msg-burst", "1e6", "-site-msg-rate", "1e7", "-site-msg-burst", "1e7")
	testkit.NoErr(t, err)
	stopped := false
	defer func() {
		if !stopped {
			edge.Stop(10 * time.Second)
		}
		if t.Failed() {
			t.Logf("edge output:\n%s", out.String())
		}
	}()
	base := "http://" + addrs[0]
	testkit.NoErr(t, edge.WaitHTTP(ctx, base+"/readyz", 30*time.Second))

	sites, err := stairs.Seed(ctx, bin, data, 20, "")
	testkit.NoErr(t, err)
	if len(sites) != 20 {
		t.Fatalf("seeded %d sites, want 20", len(sites))
	}
	// Three operators watch the sites the sockets write to: together their inboxes get
	// every message the run stored.
	ops, err := stairs.SeedOperators(ctx, bin, data, stairs.Keys(sites), 50, 3)
	testkit.NoErr(t, err)
	rep, err := stairs.Run(ctx, stairs.Config{
		Operators:  ops,
		EdgeURL:    base,
		MetricsURL: "http://" + addrs[3] + "/metrics",
		Keys:       stairs.Keys(sites),
		Sockets:    50,
		Stairs:     []float64{200, 500},
		Step:       3 * time.Second,
		Warmup:     500 * time.Millisecond,
		Drain:      15 * time.Second,
		EdgePID:    edge.PID(),
		Log:        testLog{t},
	})
	testkit.NoErr(t, err)
	var table strings.Builder
	rep.WriteTable(&table)
	t.Logf("\n%s", table.String())

	if err := edge.Stop(15 * time.Second); err != nil {
		t.Errorf("edge did not stop cleanly on SIGTERM: %v", err)
	}
	stopped = true

	if rep.SocketsOpen != 50 || len(rep.Stairs) != 2 {
		t.Fatalf("sockets %d stairs %d", rep.SocketsOpen, len(rep.Stairs))
	}
	if rep.Acked == 0 {
		t.Fatalf("nothing acked: errors %v", rep.Errors)
	}
	if rep.Unacked != 0 {
		t.Errorf("%d messages neither acked nor refused", rep.Unacked)
	}
	if rep.InboxSockets != 3 || rep.InboxFrames != rep.Acked {
		t.Errorf("%d inboxes received %d message frames for %d acked messages", rep.InboxSockets, rep.InboxFrames, rep.Acked)
	}
	if rep.DuplicateAcks != 0 || rep.ForeignFrames != 0 {
		t.Errorf("duplicate acks %d, foreign frames %d", rep.DuplicateAcks, rep.ForeignFrames)
	}
	for _, s := range rep.Stairs {
		if s.Procs == nil || s.Procs[0].CPUPercent == nil {
			t.Errorf("stair %d: no edge CPU figures", s.Stair)
		}
	}

	db, err := sql.Open("sqlite3", "file:"+filepath.Join(data, "spookat.db")+"?mode=ro")
	testkit.NoErr(t, err)
	defer db.Close()
	var rows int64
	testkit.NoErr(t, db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows))
	if rows != rep.Acked {
		t.Fatalf("report acked %d, SQLite holds %d messages (sent %d, errors %v)", rep.Acked, rows, rep.Sent, rep.Errors)
	}
	if rep.SavedDelta != nil && int64(*rep.SavedDelta) != rep.Acked {
		t.Errorf("edge metrics counted %v saved, report %d acked", *rep.SavedDelta, rep.Acked)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
