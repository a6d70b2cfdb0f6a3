package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/loadgen/lazyfs"
	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// TestPowerCut: the edge (worker inside) on a lazy filesystem, 20 visitors sending to a site
// with Slack and a webhook; at random moments the power goes (SIGKILL, then every write not
// fsynced is dropped, the last one sometimes torn) and the edge starts again on what a disk
// would hold. The first cut comes right after the first start (the keys it writes then).
// Then the load stops, every job is worked off, and the test counts, per -sync mode: acked
// messages lost, messages in SQLite never delivered, deliveries made more than once.
// SPOOKAT_POWERCUTS sets the cuts per mode (3 by default; the run is 100).
func TestPowerCut(t *testing.T) {
	if why := lazyfs.Available(); why != "" {
		t.Skip("SKIPPED: " + why)
	}
	cuts := 3
	if n, err := strconv.Atoi(os.Getenv("SPOOKAT_POWERCUTS")); err == nil && n > 0 {
		cuts = n
	}
	for _, mode := range []string{"full", "normal"} {
		t.Run(mode, func(t *testing.T) { runPowerCuts(t, mode, cuts) })
	}
}

// cutVisitor is a loader whose acks are marked with the edge's life they came in and the
// conversation they went to.
type cutVisitor struct {
	loader
	life  map[string]int   // client id → the life (0 before the first load cut) it was acked in
	convs map[int64]string // conversation id → the token it was acked to
}

func runPowerCuts(t *testing.T, mode string, cuts int) {
	bin := edgetest.Bin(t, "edge")
	slack := mock.NewSlack(mock.SlackOptions{})
	slackSrv := httptest.NewServer(slack)
	t.Cleanup(slackSrv.Close)
	const secret = "whsec_c2VjcmV0"
	hooks := mock.NewReceiver(mock.ReceiverOptions{Secret: secret})
	hookSrv := httptest.NewServer(hooks)
	t.Cleanup(hookSrv.Close)

	backing, mnt, logs := t.TempDir(), t.TempDir(), t.TempDir()
	fs, err := lazyfs.Mount(backing, mnt)
	testkit.NoErr(t, err)
	t.Cleanup(func() { fs.Unmount() })
	args := append(append(append([]string{"-sync", mode, "-worker", "inproc"}, e2eQueueFlags...),
		e2eWorkerFlags(slackSrv.URL+"/api/")...), append([]string{"-allow-private-targets"}, edgetest.NoBrakes...)...)

	// Cut 0: right after the first start, before anything else was written.
	p := edgetest.StartProcLogs(t, bin, mnt, logs, args...)
	p.Kill()
	_, err = fs.Cut(false)
	testkit.NoErr(t, err)
	fs, err = lazyfs.Mount(backing, mnt)
	testkit.NoErr(t, err)
	p = edgetest.StartProcLogs(t, bin, mnt, logs, args...) // fails here if a key came back damaged

	var site struct{ Key string }
	json.Unmarshal([]byte(edgetest.Admin(t, bin, mnt, "site", "add", "-name", "cut", "-origin", "*",
		"-slack-token", "xoxb-cut", "-slack-channel", "C0POWERCUT", "-webhook-url", hookSrv.URL+"/hook", "-webhook-secret", secret,
		"-allow-private-targets", "-json")), &site)
	if site.Key == "" {
		t.Fatal("site not created")
	}

	w := &world{up: make(chan struct{})}
	w.back(p.Addr)
	var total atomic.Int64
	var life atomic.Int64
	visitors := make([]*cutVisitor, 20)
	errs := make(chan error, len(visitors))
	var wg sync.WaitGroup
	for i := range visitors {
		v := &cutVisitor{loader: loader{site: site.Key, name: fmt.Sprintf("%s%02d", mode, i), acked: map[string]int64{},
			mayLoseVisitor: mode == "normal"}, life: map[string]int{}, convs: map[int64]string{}}
		v.onAck = func(clientID string, ack edgetest.Frame) {
			v.life[clientID] = int(life.Load())
			if ack.ConversationID != nil {
				v.convs[*ack.ConversationID] = v.token
			}
		}
		visitors[i] = v
		wg.Go(func() {
			if err := v.run(t, w, &total); err != nil {
				t.Errorf("visitor %s stopped: %v", v.name, err) // now: the load may stall without it
				errs <- err
			}
		})
	}
	torn := 0
	for c := range cuts {
		target := total.Load() + 100 + rand.Int64N(400)
		for deadline := time.Now().Add(60 * time.Second); total.Load() < target; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				probe := "no answer"
				if ws, _, err := edgetest.DialRaw(p.Addr, site.Key, "", "http://cut.test"); err == nil {
					pc := &edgetest.Client{WS: ws}
					h, _ := pc.ReadErr(5 * time.Second)
					ws.WriteJSON(map[string]string{"type": "message", "client_id": "probe", "text": "probe"})
					f, err := pc.ReadErr(5 * time.Second)
					probe = fmt.Sprintf("hello %+v, then %+v %v", h, f, err)
					ws.Close()
				}
				tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", p.Cmd.Process.Pid))
				waits := map[string]int{}
				for _, f := range tasks {
					b, _ := os.ReadFile(f)
					waits[string(b)]++
				}
				t.Fatalf("%d of %d acks before cut %d after a minute; a new visitor: %s; the edge's threads wait in %v; its log:\n%s", total.Load(), target, c+1, probe, waits, p.Log())
			}
		}
		w.restarting()
		p.Kill()
		rep, err := fs.Cut(rand.IntN(2) == 0)
		testkit.NoErr(t, err)
		if rep.Torn {
			torn++
		}
		life.Add(1)
		fs, err = lazyfs.Mount(backing, mnt)
		testkit.NoErr(t, err)
		p = edgetest.StartProcLogs(t, bin, mnt, logs, args...)
		w.back(p.Addr)
	}
	target := total.Load() + 200
	testkit.WaitFor(t, "acks after the last start", 60*time.Second, func() bool { return total.Load() >= target })
	w.stop.Store(true)
	wg.Wait()
	close(errs)

	// Every job worked off: nothing left to publish, JOBS (a work queue) empty.
	js := edgetest.ConnectOps(t, bin, mnt, "nats://"+p.NATSAddr)
	testkit.WaitFor(t, "every job published and worked off", 60*time.Second, func() bool {
		backlog, ok := edgetest.Metric(p.MetricsAddr, "spookat_publish_backlog")
		if !ok || backlog != 0 {
			return false
		}
		s, err := js.Stream(context.Background(), schema.StreamJobs)
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	if _, err := p.Stop(15 * time.Second); err != nil {
		log := p.Log() // how it ended: a panic's trace, a failed stop
		t.Fatalf("stop: %v\n%s", err, log[max(0, len(log)-6000):])
	}
	testkit.NoErr(t, fs.Unmount())

	// Count, from SQLite as the disk holds it and from what Slack and the receiver got.
	db, err := store.OpenConn(backing+"/spookat.db", sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	defer db.Close()
	if ok := edgetest.QueryText(t, db, `PRAGMA integrity_check`); ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}
	// The search index came through the cuts whole too (the edge builds a missing or foreign
	// one again, not a damaged one).
	sdb, err := store.OpenConn(backing+"/"+store.SearchFileName, sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	defer sdb.Close()
	if ok := edgetest.QueryText(t, sdb, `PRAGMA integrity_check`); ok != "ok" {
		t.Fatalf("search.db integrity_check: %s", ok)
	}
	testkit.NoErr(t, sdb.Exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 0)`))
	stored := map[string]bool{}
	st, _, err := db.Prepare(`SELECT client_id FROM messages WHERE author = 'visitor' AND client_id IS NOT NULL`)
	testkit.NoErr(t, err)
	for st.Step() {
		stored[st.ColumnText(0)] = true
	}
	st.Close()

	marker := regexp.MustCompile(`text of (` + mode + `\d\d-\d+)`)
	// A repeat must say so: a Slack post by schema.RepeatMark on its line, a webhook by the
	// webhook-id of the first delivery (a receiver following Standard Webhooks drops it).
	posts, marked, sameID := map[string]int{}, map[string]int{}, map[string]int{}
	for _, post := range slack.Posts() {
		for _, line := range strings.Split(post.Text, "\n") {
			if m := marker.FindStringSubmatch(line); m != nil {
				posts[m[1]]++
				if strings.Contains(line, schema.RepeatMark) {
					marked[m[1]]++
				}
			}
		}
	}
	hooked, hookID := map[string]int{}, map[string]string{}
	for _, ev := range hooks.Events() {
		if m := marker.FindSubmatch(ev.Body); m != nil && ev.Valid {
			cid := string(m[1])
			hooked[cid]++
			if first, ok := hookID[cid]; !ok {
				hookID[cid] = ev.ID
			} else if ev.ID == first {
				sameID[cid]++
			}
		}
	}

	// No id is given out twice, however much a cut took: a message id or a conversation id
	// seen by two visitors would meet the other's jobs, results and Slack thread.
	msgOwner, convOwner := map[int64]string{}, map[int64]string{}
	for _, v := range visitors {
		for cid, id := range v.acked {
			if other, ok := msgOwner[id]; ok && other != cid {
				t.Errorf("message id %d acked to %s and to %s", id, other, cid)
			}
			msgOwner[id] = cid
		}
		for id, token := range v.convs {
			if other, ok := convOwner[id]; ok && other != token {
				t.Errorf("conversation id %d acked to two visitors", id)
			}
			convOwner[id] = token
		}
	}
	acked, lostAcked := 0, map[int]int{}
	for _, v := range visitors {
		for cid := range v.acked {
			acked++
			if !stored[cid] {
				lostAcked[v.life[cid]]++
			}
		}
	}
	var undelivered, repeats, unmarked, phantoms int
	for cid := range stored {
		for _, n := range []int{posts[cid], hooked[cid]} {
			switch {
			case n == 0:
				undelivered++
				if undelivered <= 5 {
					t.Logf("stored, never delivered: %s (slack %d, webhook %d)", cid, posts[cid], hooked[cid])
				}
			case n > 1:
				repeats += n - 1
			}
		}
		// Every copy after the first is marked (the first may be too: a job handed out
		// before whose post had not gone out).
		miss := max(0, posts[cid]-1-marked[cid]) + max(0, hooked[cid]-1-sameID[cid])
		if unmarked += miss; miss > 0 && unmarked <= 5 {
			t.Logf("repeated without a mark: %s (slack %d, marked %d; webhook %d, same id %d)", cid, posts[cid], marked[cid], hooked[cid], sameID[cid])
		}
	}
	for cid := range posts {
		if !stored[cid] {
			phantoms++
		}
	}
	lost := 0
	for _, n := range lostAcked {
		lost += n
	}
	t.Logf("-sync %s: %d cuts (%d torn) + 1 at first start; %d acked, %d lost (per life: %v); %d stored, %d deliveries missing, %d repeated (%d without a mark); %d Slack posts of messages a cut took from SQLite",
		mode, cuts, torn, acked, lost, lostAcked, len(stored), undelivered, repeats, unmarked, phantoms)
	if mode == "full" && lost > 0 {
		t.Errorf("-sync full lost %d acked messages", lost)
	}
	if undelivered > 0 {
		t.Errorf("-sync %s: %d deliveries of stored messages never made", mode, undelivered)
	}
	if unmarked > 0 {
		t.Errorf("-sync %s: %d repeated deliveries not marked as possible repeats", mode, unmarked)
	}
}
