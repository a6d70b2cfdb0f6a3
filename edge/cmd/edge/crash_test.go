package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/edgetest"
	"spookat/schema"
	"spookat/schema/testkit"
)

// world tells the load goroutines where the edge is, and when it is back after a kill.
type world struct {
	mu   sync.Mutex
	addr string
	gen  int
	up   chan struct{} // closed when the edge of generation gen is ready
	stop atomic.Bool
}

func (w *world) current() (string, int) {
	for {
		w.mu.Lock()
		addr, gen, up := w.addr, w.gen, w.up
		w.mu.Unlock()
		select {
		case <-up:
			return addr, gen
		case <-time.After(100 * time.Millisecond):
			if w.stop.Load() {
				return "", -1
			}
		}
	}
}

// restarting marks the edge as down; back(addr) as up again.
func (w *world) restarting() {
	w.mu.Lock()
	w.gen++
	w.up = make(chan struct{})
	w.mu.Unlock()
}

func (w *world) back(addr string) {
	w.mu.Lock()
	w.addr = addr
	close(w.up)
	w.mu.Unlock()
}

// waitNext waits until an edge newer than gen is up.
func (w *world) waitNext(gen int) {
	for !w.stop.Load() {
		if _, g := w.current(); g != gen {
			return
		}
		time.Sleep(5 * time.Millisecond) // the socket died but the edge is not marked down yet
	}
}

// loader is one visitor sending as fast as acks return, reconnecting with its token after
// a crash and resending the message that was in flight (same client id).
type loader struct {
	site    string
	name    string
	token   string
	seq     int
	pending string
	acked   map[string]int64 // client id → message id
	// mayLoseVisitor takes a hello with a new token after a restart (a power cut with -sync
	// normal may take the visitor); without it that is an error.
	mayLoseVisitor bool
	onAck          func(clientID string, ack edgetest.Frame) // if set, hears each ack
}

func (l *loader) run(t *testing.T, w *world, total *atomic.Int64) error {
	for !w.stop.Load() {
		addr, gen := w.current()
		if gen < 0 {
			return nil
		}
		ws, _, err := edgetest.DialRaw(addr, l.site, l.token, "http://crash.test")
		if err != nil {
			w.waitNext(gen)
			continue
		}
		c := &edgetest.Client{WS: ws}
		hello, err := c.ReadErr(5 * time.Second)
		if err != nil {
			ws.Close()
			w.waitNext(gen)
			continue
		}
		if l.token != "" && hello.Visitor != l.token && !l.mayLoseVisitor {
			ws.Close()
			return fmt.Errorf("%s: token %s not recognised after restart (got %s)", l.name, l.token, hello.Visitor)
		}
		l.token = hello.Visitor
		for !w.stop.Load() || l.pending != "" {
			if l.pending == "" {
				l.seq++
				l.pending = fmt.Sprintf("%s-%d", l.name, l.seq)
			}
			if err := ws.WriteJSON(map[string]string{"type": "message", "client_id": l.pending, "text": "text of " + l.pending}); err != nil {
				break
			}
			f, err := c.ReadErr(10 * time.Second)
			if err != nil {
				break
			}
			if f.Type != "ack" || f.ClientID != l.pending {
				ws.Close()
				return fmt.Errorf("%s: got %+v while waiting for the ack of %s", l.name, f, l.pending)
			}
			if prev, ok := l.acked[l.pending]; ok && prev != f.MessageID {
				return fmt.Errorf("%s: %s acked as %d, then as %d", l.name, l.pending, prev, f.MessageID)
			}
			l.acked[l.pending] = f.MessageID
			if l.onAck != nil {
				l.onAck(l.pending, f)
			}
			l.pending = ""
			total.Add(1)
		}
		ws.Close()
		if w.stop.Load() && l.pending == "" {
			return nil
		}
		w.waitNext(gen)
	}
	return nil
}

// TestCrashLosesNothing: 50 sockets send as fast as acks return; the edge is SIGKILLed
// mid-stream three times and restarted on the same data. Every acked message is in SQLite
// exactly once, and every message of the site with a target has exactly one job in JOBS.
func TestCrashLosesNothing(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	dir := t.TempDir()
	args := append([]string{"-worker", "none"}, edgetest.NoBrakes...)
	p := edgetest.StartProc(t, bin, dir, args...)
	var withTarget, plain struct {
		ID  int64
		Key string
	}
	json.Unmarshal([]byte(edgetest.Admin(t, bin, dir, "site", "add", "-name", "hooked", "-origin", "*",
		"-webhook-url", "http://127.0.0.1:9/never-called", "-webhook-secret", "whsec_c2VjcmV0", "-allow-private-targets", "-json")), &withTarget)
	json.Unmarshal([]byte(edgetest.Admin(t, bin, dir, "site", "add", "-name", "plain", "-origin", "*", "-json")), &plain)
	if withTarget.Key == "" || plain.Key == "" {
		t.Fatal("sites not created")
	}

	w := &world{up: make(chan struct{})}
	w.back(p.Addr)
	var total atomic.Int64
	loaders := make([]*loader, 50)
	errs := make(chan error, len(loaders))
	var wg sync.WaitGroup
	for i := range loaders {
		site := withTarget.Key
		if i%5 == 4 {
			site = plain.Key // one in five on a site without targets: no jobs for those
		}
		loaders[i] = &loader{site: site, name: fmt.Sprintf("s%02d", i), acked: map[string]int64{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loaders[i].run(t, w, &total); err != nil {
				errs <- err
			}
		}()
	}

	const kills = 3
	for round := range kills {
		target := total.Load() + 300 + rand.Int64N(700)
		testkit.WaitFor(t, fmt.Sprintf("%d acks before kill %d", target, round+1), 60*time.Second, func() bool { return total.Load() >= target })
		w.restarting()
		p.Kill()
		t.Logf("kill %d after %d acks", round+1, total.Load())
		p = edgetest.StartProc(t, bin, dir, args...)
		w.back(p.Addr)
	}
	target := total.Load() + 300
	testkit.WaitFor(t, "acks after the last restart", 60*time.Second, func() bool { return total.Load() >= target })
	w.stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Every job the edge owes is in JOBS (backlog 0), then count them by job id.
	testkit.WaitFor(t, "publish backlog 0", 30*time.Second, func() bool {
		v, ok := edgetest.Metric(p.MetricsAddr, "spookat_publish_backlog")
		return ok && v == 0
	})
	jobs := countJobs(t, bin, dir, p.NATSAddr)

	took, err := p.Stop(15 * time.Second)
	if err != nil || took > 10*time.Second {
		t.Errorf("SIGTERM: exit %v after %s, want exit 0 within 10s", err, took)
	}

	db := edgetest.OpenDB(t, dir)
	acked := checkAcked(t, db, loaders)
	rows := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`)
	t.Logf("%d acks, %d rows, %d jobs", acked, rows, len(jobs))
	if rows < int64(acked) || rows > int64(acked+len(loaders)) {
		t.Errorf("%d rows for %d acked messages (at most one unacked in flight per socket may be stored)", rows, acked)
	}

	st, _, err := db.Prepare(`SELECT m.id, c.site_id FROM messages m JOIN conversations c ON c.id = m.conversation_id`)
	testkit.NoErr(t, err)
	defer st.Close()
	want := 0
	for st.Step() {
		id, site := st.ColumnInt64(0), st.ColumnInt64(1)
		jobID := schema.JobID(id, schema.TargetWebhook)
		switch n := jobs[jobID]; {
		case site == plain.ID && n != 0:
			t.Errorf("message %d of a site without targets has %d jobs", id, n)
		case site == withTarget.ID && n != 1:
			t.Errorf("message %d has %d jobs %s, want exactly 1", id, n, jobID)
		}
		if site == withTarget.ID {
			want++
		}
		delete(jobs, jobID)
	}
	if len(jobs) != 0 {
		t.Errorf("%d jobs in JOBS for no stored message: %v", len(jobs), jobs)
	}
	if want == 0 {
		t.Fatal("no message of the site with a target was stored")
	}
}

// checkAcked asserts that every message a loader saw acked is stored exactly once, with the
// id its ack gave, and returns how many there were.
func checkAcked(t *testing.T, db *sqlite3.Conn, loaders []*loader) (acked int) {
	t.Helper()
	for _, l := range loaders {
		for clientID, id := range l.acked {
			acked++
			st, _, err := db.Prepare(`SELECT count(*), coalesce(max(client_id), ''), coalesce(max(id), 0) FROM messages WHERE client_id = ?`)
			testkit.NoErr(t, err)
			st.BindText(1, clientID)
			st.Step()
			n, cid, got := st.ColumnInt64(0), st.ColumnText(1), st.ColumnInt64(2)
			st.Close()
			if n != 1 || cid != clientID || got != id {
				t.Errorf("acked %s (message %d): %d rows, id %d", clientID, id, n, got)
			}
		}
	}
	return acked
}

// countJobs reads every message of JOBS and counts the jobs in them by job id.
func countJobs(t *testing.T, bin, dataDir, natsAddr string) map[string]int {
	counts := map[string]int{}
	edgetest.StoredMsgs(t, edgetest.ConnectOps(t, bin, dataDir, "nats://"+natsAddr), schema.StreamJobs, func(m *jetstream.RawStreamMsg) {
		schema.SplitJobs(m.Header.Get(schema.HeaderJobs) != "", m.Data, func(line []byte) {
			var j schema.Job
			if err := json.Unmarshal(line, &j); err != nil {
				t.Fatalf("JOBS seq %d: %v", m.Sequence, err)
			}
			counts[j.ID]++
		})
	})
	return counts
}

// TestGracefulStopUnderLoad: SIGTERM while 20 sockets send. The edge exits 0 within 10 s,
// every acked message is stored, and every committed message's jobs were confirmed by
// JetStream before it exited (the persisted watermark is the highest message id): nothing
// waits for the next start's replay.
func TestGracefulStopUnderLoad(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	dir := t.TempDir()
	args := append([]string{"-worker", "none"}, edgetest.NoBrakes...)
	p := edgetest.StartProc(t, bin, dir, args...)
	var site struct{ Key string }
	json.Unmarshal([]byte(edgetest.Admin(t, bin, dir, "site", "add", "-name", "hooked", "-origin", "*",
		"-webhook-url", "http://127.0.0.1:9/never-called", "-webhook-secret", "whsec_c2VjcmV0", "-allow-private-targets", "-json")), &site)

	w := &world{up: make(chan struct{})}
	w.back(p.Addr)
	var total atomic.Int64
	loaders := make([]*loader, 20)
	var wg sync.WaitGroup
	for i := range loaders {
		loaders[i] = &loader{site: site.Key, name: fmt.Sprintf("g%02d", i), acked: map[string]int64{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			loaders[i].run(t, w, &total) // ends with an error when the edge goes away: expected here
		}()
	}
	testkit.WaitFor(t, "500 acks", 60*time.Second, func() bool { return total.Load() >= 500 })
	w.restarting() // the edge will not come back: loaders stop at their next failure
	took, err := p.Stop(15 * time.Second)
	w.stop.Store(true)
	wg.Wait()
	if err != nil || took > 10*time.Second {
		t.Fatalf("SIGTERM under load: exit %v after %s, want exit 0 within 10s", err, took)
	}
	db := edgetest.OpenDB(t, dir)
	acked := checkAcked(t, db, loaders)
	maxID := edgetest.QueryInt(t, db, `SELECT coalesce(max(id), 0) FROM messages`)
	wm := edgetest.QueryInt(t, db, `SELECT published_through FROM outbox`)
	t.Logf("%d acked, stop took %s, max message id %d, watermark %d", acked, took.Round(time.Millisecond), maxID, wm)
	if wm != maxID {
		t.Fatalf("watermark %d after a graceful stop, want the highest message id %d: jobs were left unconfirmed", wm, maxID)
	}
}
