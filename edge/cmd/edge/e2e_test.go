package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/edgetest"
	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// The end-to-end tests of delivery: real widget websockets into bin/edge, jobs through its
// embedded JetStream, real workers (two bin/worker processes, or the edge's in-process one)
// posting to the Slack mock, results recorded by the edge in SQLite.
const (
	e2eSites    = 20
	e2eConvs    = 200 // one visitor socket each
	e2ePerConv  = 10
	e2eMessages = e2eConvs * e2ePerConv
)

// e2eQueueFlags shrink the queue's timers (the edge provisions them) so a killed worker's
// partitions and jobs come back within seconds; e2eWorkerFlags are the worker's own.
var e2eQueueFlags = []string{"-ack-wait", "2s", "-pinned-ttl", "3s", "-member-ttl", "2s"}

func e2eWorkerFlags(slackAPI string) []string {
	return []string{"-slack-api", slackAPI, "-pull-expiry", "1s", "-stop-timeout", "3s", "-retry-base", "100ms", "-retry-max", "1s"}
}

// TestE2ETwoProcesses: bin/edge -worker none, two bin/worker processes and the Slack mock;
// 2,000 messages over 200 conversations through widget sockets; one worker is SIGKILLed while
// posts are going out. Every message reaches Slack, each conversation in order in its thread,
// duplicates only of what the killed worker had taken, nothing in DEAD, every delivery recorded.
func TestE2ETwoProcesses(t *testing.T) { runE2E(t, true) }

// TestE2EOneProcess: the same with the worker inside the edge (bin/edge -worker inproc).
func TestE2EOneProcess(t *testing.T) { runE2E(t, false) }

func runE2E(t *testing.T, twoProcesses bool) {
	bin := edgetest.Bin(t, "edge")
	workerBin := ""
	if twoProcesses {
		workerBin = edgetest.Bin(t, "worker")
	}
	start := time.Now()
	slack := mock.NewSlack(mock.SlackOptions{Latency: 30 * time.Millisecond})
	slackSrv := httptest.NewServer(slack)
	t.Cleanup(slackSrv.Close)
	wflags := e2eWorkerFlags(slackSrv.URL + "/api/")

	dir := t.TempDir()
	var p *edgetest.Proc
	if twoProcesses {
		p = edgetest.StartProc(t, bin, dir, append([]string{"-worker", "none"}, e2eQueueFlags...)...)
	} else {
		p = edgetest.StartProc(t, bin, dir, append(append([]string{"-worker", "inproc"}, e2eQueueFlags...), wflags...)...)
	}

	// Sites with Slack, each its own channel.
	edgetest.Admin(t, bin, dir, "seed", "-sites", strconv.Itoa(e2eSites), "-prefix", "e2e", "-slack-token", "xoxb-e2e", "-json")
	sites := slackSites(t, bin, dir)
	if len(sites) != e2eSites {
		t.Fatalf("%d sites with Slack, want %d: %+v", len(sites), e2eSites, sites)
	}

	js := edgetest.ConnectOps(t, bin, dir, "nats://"+p.NATSAddr)

	var workers []*edgetest.WorkerProc
	if twoProcesses {
		for _, id := range []string{"w1", "w2"} {
			creds := edgetest.Creds(t, bin, dir, "worker", id)
			workers = append(workers, edgetest.StartWorker(t, workerBin, dir, id,
				append([]string{"-nats-url", "nats://" + p.NATSAddr, "-nats-creds", creds}, wflags...)...))
		}
	}
	wantMembers := max(len(workers), 1)
	testkit.WaitFor(t, fmt.Sprintf("%d workers in WORKERS", wantMembers), 15*time.Second, func() bool {
		return len(members(js)) == wantMembers
	})
	t.Logf("edge, workers and %d sites up after %s", len(sites), time.Since(start).Round(time.Millisecond))

	// 200 visitors, 10 messages each, each sent once the previous one is acked.
	visitors := make([]*e2eVisitor, e2eConvs)
	errs := make(chan error, e2eConvs)
	var wg sync.WaitGroup
	for i := range visitors {
		v := &e2eVisitor{siteKey: sites[i%len(sites)].key, channel: sites[i%len(sites)].channel}
		visitors[i] = v
		wg.Go(func() {
			if err := v.run(p.Addr, i); err != nil {
				errs <- fmt.Errorf("visitor %d: %w", i, err)
			}
		})
	}

	// SIGKILL one worker while posts are going out.
	var killAt time.Time
	var takenAtKill int
	if twoProcesses {
		testkit.WaitFor(t, "a quarter of the posts", 20*time.Second, func() bool { return slack.Count() >= e2eMessages/4 })
		workers[0].Kill()
		killAt = time.Now()
		takenAtKill = ackPending(t, js)
		t.Logf("SIGKILL worker w1 after %d posts; %d chat jobs taken and not acked at that moment", slack.Count(), takenAtKill)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("2,000 messages acked by the edge after %s", time.Since(start).Round(time.Millisecond))

	label := regexp.MustCompile(`e2e v(\d{3}) m(\d{2})`)
	type occ struct {
		k      int
		post   int
		parent bool
		ts     string
		thread string
	}
	parse := func(posts []mock.Post) (map[int][]occ, int) {
		byConv := map[int][]occ{}
		n := 0
		for pi, post := range posts {
			for _, m := range label.FindAllStringSubmatch(post.Text, -1) {
				v, _ := strconv.Atoi(m[1])
				k, _ := strconv.Atoi(m[2])
				byConv[v] = append(byConv[v], occ{k: k, post: pi, parent: post.ThreadTS == "", ts: post.TS, thread: post.ThreadTS})
				n++
			}
		}
		return byConv, n
	}
	distinct := func(byConv map[int][]occ) int {
		n := 0
		for _, occs := range byConv {
			seen := map[int]bool{}
			for _, o := range occs {
				seen[o.k] = true
			}
			n += len(seen)
		}
		return n
	}
	testkit.WaitFor(t, "every message at the Slack mock", 25*time.Second, func() bool {
		byConv, _ := parse(slack.Posts())
		return distinct(byConv) == e2eMessages
	})
	t.Logf("every message posted after %s", time.Since(start).Round(time.Millisecond))

	// Every delivery recorded by the edge, while it runs.
	db := edgetest.OpenDB(t, dir)
	testkit.WaitFor(t, "2,000 delivered Slack results in SQLite", 15*time.Second, func() bool {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM deliveries WHERE target = 'slack' AND status = 'delivered'`) == e2eMessages
	})
	testkit.WaitFor(t, "JOBS drained", 10*time.Second, func() bool { return streamMsgs(t, js, schema.StreamJobs) == 0 })
	if n := streamMsgs(t, js, schema.StreamDead); n != 0 {
		t.Errorf("%d jobs in DEAD, want none", n)
	}

	posts := slack.Posts()
	byConv, total := parse(posts)
	dups := total - e2eMessages
	dupHist := map[int]int{} // duplicates in a conversation → conversations
	for i, v := range visitors {
		occs := byConv[i]
		var firsts, lasts []int
		lastAt := map[int]int{}
		var parents []string
		threads := map[string]bool{}
		dupes := 0
		seen := map[int]bool{}
		for j, o := range occs {
			if posts[o.post].Channel != v.channel {
				t.Errorf("v%03d m%02d posted to %s, want the site's channel %s", i, o.k, posts[o.post].Channel, v.channel)
			}
			if seen[o.k] {
				dupes++
				if twoProcesses {
					first := slices.IndexFunc(occs, func(x occ) bool { return x.k == o.k })
					if posts[occs[first].post].Received.After(killAt) {
						t.Errorf("v%03d m%02d posted twice, first sent after the kill: a duplicate that no crash explains", i, o.k)
					}
				}
			} else {
				firsts = append(firsts, o.k)
			}
			seen[o.k] = true
			lastAt[o.k] = j
			if o.k == 0 {
				if !o.parent {
					t.Errorf("v%03d: first message posted as a reply in %s, want a parent post", i, o.thread)
				}
				parents = append(parents, o.ts)
			} else {
				if o.parent {
					t.Errorf("v%03d m%02d posted as a parent, want a reply in the thread", i, o.k)
				}
				threads[o.thread] = true
			}
		}
		for k := range e2ePerConv {
			lasts = append(lasts, k)
		}
		slices.SortFunc(lasts, func(a, b int) int { return lastAt[a] - lastAt[b] })
		want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		if !slices.Equal(firsts, want) || !slices.Equal(lasts, want) {
			t.Errorf("v%03d: order at Slack %v (first copies %v, last copies %v), want %v", i, occs, firsts, lasts, want)
		}
		if len(threads) != 1 {
			t.Errorf("v%03d: replies in %d threads %v, want 1", i, len(threads), threads)
		}
		var thread string
		for th := range threads {
			thread = th
		}
		if !slices.Contains(parents, thread) {
			t.Errorf("v%03d: replies in thread %s, not one of the conversation's parent posts %v", i, thread, parents)
		}
		v.thread = thread
		if dupes > 0 {
			dupHist[dupes]++
		}
		if !twoProcesses && dupes > 0 {
			t.Errorf("v%03d: %d duplicate posts without any crash", i, dupes)
		}
	}
	t.Logf("%d posts for %d messages: %d duplicates (%d chat jobs were taken and unacked at the kill); conversations by duplicates: %v",
		len(posts), e2eMessages, dups, takenAtKill, dupHist)
	if dups > takenAtKill {
		t.Errorf("%d duplicates, more than the %d jobs in flight at the kill", dups, takenAtKill)
	}

	// Stop: the surviving worker exits 0 on SIGTERM, then the edge.
	for _, w := range workers[min(1, len(workers)):] {
		if took, err := w.Stop(10 * time.Second); err != nil || took > 8*time.Second {
			t.Errorf("worker %s SIGTERM: exit %v after %s, want exit 0 promptly\n%s", w.ID, err, took, w.Log())
		}
	}
	js.Conn().Close()
	if took, err := p.Stop(15 * time.Second); err != nil || took > 10*time.Second {
		t.Errorf("edge SIGTERM: exit %v after %s, want exit 0 within 10s", err, took)
	}

	// The edge recorded every delivery and every conversation's Slack thread.
	st, _, err := db.Prepare(`SELECT d.status, d.external_id, c.slack_thread FROM messages m
		JOIN conversations c ON c.id = m.conversation_id
		LEFT JOIN deliveries d ON d.message_id = m.id AND d.target = 'slack' WHERE m.id = ?`)
	testkit.NoErr(t, err)
	defer st.Close()
	tsOf := map[string]bool{}
	for _, post := range posts {
		tsOf[post.TS] = true
	}
	for i, v := range visitors {
		for k, id := range v.msgIDs {
			st.Reset()
			st.BindInt64(1, id)
			if !st.Step() {
				t.Fatalf("message %d (v%03d m%02d) not in SQLite: %v", id, i, k, st.Err())
			}
			status, ext, thread := schema.DeliveryStatus(st.ColumnText(0)), st.ColumnText(1), st.ColumnText(2)
			if status != schema.StatusDelivered || !tsOf[ext] {
				t.Errorf("v%03d m%02d (message %d): delivery %q, external id %q, want delivered with a posted ts", i, k, id, status, ext)
			}
			if thread != v.thread {
				t.Errorf("v%03d: conversations.slack_thread %q, want %q", i, thread, v.thread)
			}
		}
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != e2eMessages {
		t.Errorf("%d messages in SQLite, want %d", n, e2eMessages)
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// e2eVisitor is one widget socket: one conversation of e2ePerConv messages.
type e2eVisitor struct {
	siteKey, channel string
	msgIDs           [e2ePerConv]int64
	thread           string // the Slack thread its replies went to
}

func (v *e2eVisitor) run(addr string, n int) error {
	c, err := edgetest.DialVisitor(addr, v.siteKey, "http://e2e.test")
	if err != nil {
		return err
	}
	defer c.WS.Close()
	for k := range e2ePerConv {
		f, err := c.SendAck(fmt.Sprintf("v%03d-%02d", n, k), fmt.Sprintf("e2e v%03d m%02d", n, k))
		if err != nil {
			return err
		}
		v.msgIDs[k] = f.MessageID
	}
	return nil
}

// members lists the workers in the WORKERS bucket, as `nats stream subjects KV_WORKERS`
// does for the ops identity.
func members(js jetstream.JetStream) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+schema.BucketWorkers)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("$KV."+schema.BucketWorkers+".>"))
	if err != nil {
		return nil
	}
	var keys []string
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, "$KV."+schema.BucketWorkers+"."))
	}
	return keys
}

// ackPending counts the chat jobs taken by a worker and not acked yet: the jobs of every
// chat message still in JOBS (a work queue deletes what is acked) that its partition's
// consumer has delivered.
func ackPending(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	delivered := map[string]uint64{} // "jobs.chat.<partition>." → the consumer's last delivered stream seq
	for i := range schema.JobShards(schema.LaneChat) {
		c, err := js.Consumer(ctx, schema.StreamJobs, schema.JobConsumer(schema.LaneChat, i))
		testkit.NoErr(t, err)
		info, err := c.Info(ctx)
		testkit.NoErr(t, err)
		delivered["jobs.chat."+strconv.Itoa(i)+"."] = info.Delivered.Stream
	}
	n := 0
	edgetest.StoredMsgs(t, js, schema.StreamJobs, func(m *jetstream.RawStreamMsg) {
		tok := strings.SplitN(m.Subject, ".", 4)
		if len(tok) < 4 || m.Sequence > delivered[tok[0]+"."+tok[1]+"."+tok[2]+"."] {
			return
		}
		schema.SplitJobs(m.Header.Get(schema.HeaderJobs) != "", m.Data, func([]byte) { n++ })
	})
	return n
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	testkit.NoErr(t, err)
	info, err := s.Info(ctx)
	testkit.NoErr(t, err)
	return info.State.Msgs
}
