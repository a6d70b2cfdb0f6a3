package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// The RUNBOOK's drill "the box is gone, with Litestream": the edge serves under load with
// Litestream (the version the Makefile installs) replicating its database to a file replica,
// and a nightly `edge backup` for the keys and attachments; the edge and Litestream are
// killed together; `litestream restore` then `edge restore -db` make a new data directory,
// and an edge started on it knows every message acked up to Litestream's last sync, the
// visitors and the site. Counted: what was acked, what came back, what was lost and when.
func TestLitestreamDrill(t *testing.T) {
	bin, ls := edgetest.Bin(t, "edge"), edgetest.Bin(t, "litestream")
	dir := t.TempDir()
	data, replica := filepath.Join(dir, "data"), filepath.Join(dir, "replica")
	testkit.NoErr(t, os.Mkdir(data, 0o700))
	p := edgetest.StartProc(t, bin, data, edgetest.NoBrakes...)
	site := edgetest.AddSite(t, data, &store.Site{Name: "drill", Origins: []string{"http://site.test"}})
	archive := filepath.Join(dir, "nightly.tar.gz")
	edgetest.Admin(t, bin, data, "backup", "-out", archive)
	var out []byte

	// The shipped configuration, with a folder for the replica.
	conf, err := filepath.Abs("../../../ops/litestream/litestream.yml")
	testkit.NoErr(t, err)
	t.Setenv("SPOOKAT_DATA", data)
	t.Setenv("LITESTREAM_REPLICA_URL", "file://"+replica)
	lsp := edgetest.StartCmd(t, "litestream", dir, ls, "replicate", "-config", conf)

	var (
		mu     sync.Mutex
		acked  = map[int64]time.Time{} // message id → when its ack came
		tokens []string
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for v := range 8 {
		c := edgetest.Dial(t, p.Addr, site.Key, "")
		tokens = append(tokens, c.Hello.Visitor)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("v%d-%d", v, i)
				ack, err := c.SendAck(id, "drill "+id)
				if err != nil {
					return // the kill
				}
				mu.Lock()
				acked[ack.MessageID] = time.Now()
				mu.Unlock()
			}
		})
	}
	testkit.WaitFor(t, "Litestream's first sync", 30*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(replica, "*", "*", "*"))
		return len(m) > 0
	})
	loaded := time.Now()
	time.Sleep(4 * time.Second) // load while Litestream replicates: the drill's length, not a wait for a condition
	// What the edge's own checkpoints met beside Litestream's read transaction.
	metric := func(series string) float64 { v, _ := edgetest.Metric(p.MetricsAddr, series); return v }
	whole, partial := metric(`spookat_wal_writer_checkpoints_total{outcome="whole"}`), metric(`spookat_wal_writer_checkpoints_total{outcome="partial"}`)
	walBytes, stalled := metric("spookat_wal_bytes"), metric("spookat_wal_writer_checkpoint_seconds_total")
	// The box is gone: both at once, mid-load.
	killed := time.Now()
	lsp.Kill()
	p.Kill()
	stop.Store(true)
	wg.Wait()

	restoredDB := filepath.Join(dir, "litestream.db")
	out, err = exec.Command(ls, "restore", "-config", conf, "-o", restoredDB, filepath.Join(data, store.FileName)).CombinedOutput()
	if err != nil {
		t.Fatalf("litestream restore: %v\n%s\nlitestream log:\n%s", err, out, lsp.Log())
	}
	fresh := filepath.Join(dir, "fresh")
	out, err = exec.Command(bin, "restore", "-from", archive, "-db", restoredDB, "-data", fresh).CombinedOutput()
	if err != nil {
		t.Fatalf("edge restore: %v\n%s", err, out)
	}

	db := edgetest.OpenDB(t, fresh)
	have := map[int64]bool{}
	st, _, err := db.Prepare(`SELECT id FROM messages`)
	testkit.NoErr(t, err)
	for st.Step() {
		have[st.ColumnInt64(0)] = true
	}
	st.Close()
	if ok := edgetest.QueryText(t, db, `PRAGMA integrity_check`); ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}
	db.Close()
	var lost []time.Duration // how long before the kill each lost message was acked
	for id, at := range acked {
		if !have[id] {
			lost = append(lost, killed.Sub(at))
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] > lost[j] })
	oldest := time.Duration(0)
	if len(lost) > 0 {
		oldest = lost[0]
	}
	t.Logf("Litestream drill: %d acked in %s of load, %d in the restored database, %d lost (acked at most %s before the kill); the edge's own checkpoints: %.0f whole, %.0f partial, %.3f s in them, WAL %.1f MB at the kill",
		len(acked), killed.Sub(loaded).Round(time.Millisecond), len(have), len(lost), oldest.Round(time.Millisecond), whole, partial, stalled, walBytes/1e6)
	// Litestream ships every second: what it lost was acked in the last sync interval and the
	// time the sync took, never earlier.
	if oldest > 3*time.Second {
		t.Errorf("a message acked %s before the kill is not in Litestream's copy", oldest)
	}
	if len(have) < len(acked)/2 {
		t.Errorf("only %d of %d acked messages restored", len(have), len(acked))
	}

	// The restored directory serves: the visitors and the site are known.
	r := edgetest.StartProc(t, bin, fresh)
	c := edgetest.Dial(t, r.Addr, site.Key, tokens[0])
	if c.Hello.Visitor != tokens[0] {
		t.Fatalf("a visitor is unknown after the restore: %+v", c.Hello)
	}
	if _, err := c.SendAck("after", "after the restore"); err != nil {
		t.Fatalf("a message after the restore: %v", err)
	}
	if !strings.Contains(edgetest.Admin(t, bin, fresh, "site", "list"), site.Key) {
		t.Error("the site is gone after the restore")
	}
}
