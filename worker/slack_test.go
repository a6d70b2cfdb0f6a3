package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

func TestSlackParentThenRepliesInThread(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{Latency: 2 * time.Millisecond})
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", SlackToken: "xoxb-1", SlackChannel: "C1"})
	w := e.start(e.config())

	first := job(schema.TargetSlack, 1, 7, 100, true, marker(7, 0))
	second := job(schema.TargetSlack, 1, 7, 101, false, marker(7, 1))
	reply := job(schema.TargetSlack, 1, 7, 102, false, marker(7, 2))
	reply.Author, reply.Name = "operator", "Ann"
	e.publish(first, second, reply)

	testkit.WaitFor(t, "3 posts", 10*time.Second, func() bool { return e.slack.Count() == 3 })
	posts := e.slack.Posts()
	parent := posts[0]
	if parent.ThreadTS != "" || parent.Channel != "C1" || parent.Token != "xoxb-1" {
		t.Fatalf("parent post: %+v", parent)
	}
	if !strings.Contains(parent.Text, "New conversation #7 on Acme") || !strings.Contains(parent.Text, "/inbox/c/7|open in inbox>") {
		t.Errorf("parent text: %q", parent.Text)
	}
	for i, p := range posts[1:] {
		if p.ThreadTS != parent.TS {
			t.Errorf("reply %d not in the thread: %+v", i, p)
		}
	}
	if !strings.Contains(posts[2].Text, "Ann (operator)") {
		t.Errorf("operator reply: %q", posts[2].Text)
	}
	checkOrder(t, 7, sequences(posts)[7], 3)

	testkit.WaitFor(t, "3 delivered results", 5*time.Second, func() bool { return len(e.results.final(schema.StatusDelivered)) == 3 })
	for i, j := range []schema.Job{first, second, reply} {
		rs := e.results.of(j.ID)
		r := rs[len(rs)-1]
		if r.Status != schema.StatusDelivered || r.ThreadID != parent.TS || r.ExternalID != posts[i].TS || r.Attempts != 1 {
			t.Errorf("result of %s: %+v", j.ID, r)
		}
	}
	// The thread is where every worker finds it.
	kv, _ := e.js.KeyValue(context.Background(), schema.BucketThreads)
	ent, err := kv.Get(context.Background(), schema.ThreadKey(schema.TargetSlack, 1, 7))
	if err != nil || string(ent.Value()) != parent.TS {
		t.Fatalf("THREADS entry: %v %v", ent, err)
	}
	// Jobs are acked: JOBS is empty (work queue).
	testkit.WaitFor(t, "JOBS drained", 5*time.Second, func() bool { return streamMsgs(t, e, schema.StreamJobs) == 0 })
	if w.counter("spookat_worker_jobs_total", "target", "slack", "status", "delivered") != 3 {
		t.Errorf("metrics: delivered = %v", w.counter("spookat_worker_jobs_total", "target", "slack", "status", "delivered"))
	}
	w.stop(t)
}

func streamMsgs(t *testing.T, e *env, name string) uint64 {
	s, err := e.js.Stream(context.Background(), name)
	testkit.NoErr(t, err)
	info, err := s.Info(context.Background())
	testkit.NoErr(t, err)
	return info.State.Msgs
}

func TestSlackChannelNotFoundIsDeadAtOnce(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	e.putSite(schema.SiteDelivery{SiteID: 2, SlackToken: "xoxb-2", SlackChannel: "CNOTFOUND1"})
	e.putSite(schema.SiteDelivery{SiteID: 3, SlackToken: "xoxb-revoked-3", SlackChannel: "C3"})
	cfg := e.config()
	cfg.MaxAttempts = 10
	cfg.RetryBase = time.Minute // a retry would blow the deadline below
	e.start(cfg)
	a := job(schema.TargetSlack, 2, 1, 1, true, "hello")
	b := job(schema.TargetSlack, 3, 2, 2, true, "hello")
	start := time.Now()
	e.publish(a, b)
	testkit.WaitFor(t, "2 dead results", 5*time.Second, func() bool { return len(e.results.final(schema.StatusDead)) == 2 })
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("dead after %s, want at once", d)
	}
	dead := e.deadJobs()
	if len(dead) != 2 {
		t.Fatalf("DEAD has %d jobs, want 2", len(dead))
	}
	errs := map[string]bool{}
	for _, m := range dead {
		errs[m.Header.Get(schema.HeaderError)] = true
		if m.Header.Get(schema.HeaderAttempts) != "1" || m.Header.Get(schema.HeaderTarget) != "slack" {
			t.Errorf("dead headers: %v", m.Header)
		}
		if !strings.HasPrefix(m.Subject, "dead.chat.") {
			t.Errorf("dead subject %q", m.Subject)
		}
	}
	if !errs["slack: channel_not_found"] || !errs["slack: invalid_auth"] {
		t.Errorf("dead errors: %v", errs)
	}
	if r := e.results.of(a.ID); r[len(r)-1].Error != "slack: channel_not_found" {
		t.Errorf("dead result: %+v", r)
	}
}

func TestSlackRetriesThenDead(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "C1"})
	e.putSite(schema.SiteDelivery{SiteID: 2, SlackToken: "xoxb-2", SlackChannel: "C2"})
	e.slack.FailNext("C1", 2)   // two 500s, then fine
	e.slack.FailNext("C2", 100) // never fine
	w := e.start(e.config())    // 4 attempts
	ok := job(schema.TargetSlack, 1, 1, 1, true, marker(1, 0))
	next := job(schema.TargetSlack, 1, 1, 2, false, marker(1, 1))
	bad := job(schema.TargetSlack, 2, 2, 3, true, "x")
	e.publish(ok, next, bad)
	testkit.WaitFor(t, "results", 10*time.Second, func() bool {
		return len(e.results.final(schema.StatusDelivered)) == 2 && len(e.results.final(schema.StatusDead)) == 1
	})
	// The failing head held its conversation back: order kept through retries.
	checkOrder(t, 1, sequences(e.slack.Posts())[1], 2)
	if rs := e.results.of(ok.ID); rs[len(rs)-1].Attempts != 3 || len(rs) != 3 {
		t.Errorf("results of the retried job: %+v", rs)
	}
	dead := e.deadJobs()
	if len(dead) != 1 || dead[0].Header.Get(schema.HeaderAttempts) != "4" || dead[0].Header.Get(schema.HeaderError) != "slack: http 500" {
		t.Fatalf("DEAD: %d %v", len(dead), dead)
	}
	if got := w.counter("spookat_worker_retries_total", "target", "slack"); got != 2+3 {
		t.Errorf("retries metric %v, want 5", got)
	}
}

// A conversation's status reaches its Slack thread: closing adds the bot's ✅ to the parent
// post and writes who closed it; the visitor's next message reopens it, which takes the ✅ off
// and says so above the message. A status change of a conversation with no thread posts
// nothing.
func TestSlackStatusMarksTheParent(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", SlackToken: "xoxb-1", SlackChannel: "C1"})
	w := e.start(e.config())

	e.publish(job(schema.TargetSlack, 1, 7, 100, true, marker(7, 0)))
	testkit.WaitFor(t, "the parent post", 10*time.Second, func() bool { return e.slack.Count() == 1 })
	parent := e.slack.Posts()[0]

	closed := job(schema.TargetSlack, 1, 7, 101, false, "Closed by Ann")
	closed.Author, closed.Name, closed.Kind = schema.AuthorSystem, "Ann", schema.KindClosed
	e.publish(closed)
	testkit.WaitFor(t, "the ✅ and the status line", 10*time.Second, func() bool {
		return e.slack.Reacted("C1", parent.TS, "white_check_mark") && e.slack.Count() == 2
	})
	if p := e.slack.Posts()[1]; p.ThreadTS != parent.TS || p.Text != ":white_check_mark: _Closed by Ann_" {
		t.Fatalf("status line: %+v", p)
	}

	again := job(schema.TargetSlack, 1, 7, 102, false, marker(7, 1))
	again.Reopened = true
	e.publish(again)
	testkit.WaitFor(t, "the ✅ removed and the message posted", 10*time.Second, func() bool {
		return !e.slack.Reacted("C1", parent.TS, "white_check_mark") && e.slack.Count() == 3
	})
	if p := e.slack.Posts()[2]; p.ThreadTS != parent.TS || !strings.HasPrefix(p.Text, ":leftwards_arrow_with_hook: _Reopened by the visitor's message_\n") ||
		!strings.Contains(p.Text, marker(7, 1)) {
		t.Fatalf("reopening message: %+v", p)
	}
	if rs := e.slack.Reactions(); len(rs) != 2 || !rs[0].On || rs[1].On || rs[0].TS != parent.TS {
		t.Fatalf("reactions: %+v", rs)
	}

	lone := job(schema.TargetSlack, 1, 8, 103, false, "Closed by Ann")
	lone.Author, lone.Kind = schema.AuthorSystem, schema.KindClosed
	e.publish(lone)
	testkit.WaitFor(t, "4 delivered results", 10*time.Second, func() bool { return len(e.results.final(schema.StatusDelivered)) == 4 })
	if n := e.slack.Count(); n != 3 {
		t.Fatalf("a status change without a thread posted: %d posts, want 3", n)
	}
	w.stop(t)
}

// A job that may have been delivered before says so in its post: the edge's replay marked it,
// or it was stored in JOBS before an edge started after a crash or power cut (whose JetStream
// may have lost the acknowledgements). A job stored after that start is posted plain.
func TestSlackMarksPossibleRepeats(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", SlackToken: "xoxb-1", SlackChannel: "C1"})

	replayed := job(schema.TargetSlack, 1, 1, 100, true, marker(1, 0))
	replayed.MaybeRepeat = true
	before := job(schema.TargetSlack, 1, 2, 101, true, marker(2, 0))
	e.publish(replayed, before)

	body, err := json.Marshal(schema.UncleanStart{At: time.Now()})
	testkit.NoErr(t, err)
	kv, err := e.js.KeyValue(context.Background(), schema.BucketSites)
	testkit.NoErr(t, err)
	_, err = kv.Put(context.Background(), schema.KeyUncleanStart, e.auth.SignSite(schema.KeyUncleanStart, body))
	testkit.NoErr(t, err)
	// A value not signed by the edge is ignored: it would otherwise mark every job.
	forged, _ := json.Marshal(schema.UncleanStart{At: time.Now().Add(time.Hour)})
	_, err = kv.Put(context.Background(), schema.KeyUncleanStart+".x", forged)
	testkit.NoErr(t, err)

	after := job(schema.TargetSlack, 1, 3, 102, true, marker(3, 0))
	e.publish(after)
	w := e.start(e.config())
	defer w.stop(t)

	testkit.WaitFor(t, "3 posts", 10*time.Second, func() bool { return e.slack.Count() == 3 })
	for _, p := range e.slack.Posts() {
		want := !strings.Contains(p.Text, marker(3, 0))
		if got := strings.Contains(p.Text, schema.RepeatMark); got != want {
			t.Errorf("marked %v, want %v: %q", got, want, p.Text)
		}
	}
}
