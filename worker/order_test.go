package worker_test

import (
	"strconv"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// Two workers share the partitions; one is cut off mid-run (no hand-over, its acks lost), a
// third joins later. Every message arrives, each conversation in order, nothing is dead.
func TestOrderAcrossWorkersCrashAndJoin(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(map[bool]string{false: "single jobs", true: "batches"}[batched], func(t *testing.T) {
			testOrderAcrossWorkersCrashAndJoin(t, batched)
		})
	}
}

func testOrderAcrossWorkersCrashAndJoin(t *testing.T, batched bool) {
	const convs, perConv, sitesN = 60, 20, 6
	e := newEnv(t, mock.SlackOptions{Latency: 3 * time.Millisecond})
	e.batched = batched
	for s := int64(1); s <= sitesN; s++ {
		e.putSite(schema.SiteDelivery{SiteID: s, SlackToken: "xoxb-" + strconv.FormatInt(s, 10), SlackChannel: "C" + strconv.FormatInt(s, 10)})
	}
	a := e.start(e.config())
	b := e.start(e.config())

	msgID := int64(0)
	round := func(k int) {
		var jobs []schema.Job
		for c := int64(1); c <= convs; c++ {
			msgID++
			jobs = append(jobs, job(schema.TargetSlack, c%sitesN+1, c, msgID, k == 0, marker(c, k)))
		}
		e.publish(jobs...)
	}
	for k := 0; k < 8; k++ {
		round(k)
	}
	testkit.WaitFor(t, "both workers delivering", 20*time.Second, func() bool {
		return a.counter("spookat_worker_jobs_total") > 0 && b.counter("spookat_worker_jobs_total") > 0 && e.slack.Count() >= convs*4
	})
	heldByB := b.counter("spookat_worker_queued")
	b.crash()
	t.Logf("crashed b after %d posts; b had delivered %v and held %v jobs", e.slack.Count(),
		b.counter("spookat_worker_jobs_total"), heldByB)
	for k := 8; k < 14; k++ {
		round(k)
	}
	testkit.WaitFor(t, "round 13 under way", 30*time.Second, func() bool { return countMarkers(e.slack.Posts()) >= convs*11 })
	c := e.start(e.config())
	testkit.WaitFor(t, "the new worker to own partitions", 20*time.Second, func() bool {
		return c.counter("spookat_worker_partitions_owned", "lane", "chat") > 0
	})
	for k := 14; k < perConv; k++ {
		round(k)
	}
	e.waitForMarkers(t, 60*time.Second, convs, perConv)
	testkit.WaitFor(t, "every job recorded delivered", 20*time.Second, func() bool {
		return len(e.results.final(schema.StatusDelivered)) == convs*perConv
	})
	if c.counter("spookat_worker_jobs_total") == 0 {
		t.Errorf("the worker that joined delivered nothing")
	}
	dups := 0
	posts := e.slack.Posts()
	for conv, seq := range sequences(posts) {
		dups += checkOrder(t, conv, seq, perConv)
	}
	// Repeats come only from what b had taken and not acked when it was cut off: its queued
	// and in-flight jobs, and with batches the delivered jobs of batches not finished.
	bound := int(heldByB) + e.config().ChatInFlight
	if batched {
		bound *= e.maxBatch
	}
	if dups > bound {
		t.Errorf("%d repeated messages, more than b could have had in hand (%d)", dups, bound)
	}
	if n := len(e.deadJobs()); n != 0 {
		t.Errorf("%d jobs in DEAD", n)
	}
	t.Logf("%d posts, %d repeats after the crash", len(posts), dups)
	a.stop(t)
	c.stop(t)
}

// A worker that stops gracefully hands its partitions over: nothing repeated, nothing lost.
func TestGracefulHandOver(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(map[bool]string{false: "single jobs", true: "batches"}[batched], func(t *testing.T) {
			testGracefulHandOver(t, batched)
		})
	}
}

func testGracefulHandOver(t *testing.T, batched bool) {
	const convs, perConv = 40, 10
	e := newEnv(t, mock.SlackOptions{Latency: 5 * time.Millisecond})
	e.batched = batched
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "C1"})
	a := e.start(e.config())
	b := e.start(e.config())
	msgID := int64(0)
	for k := 0; k < perConv; k++ {
		var jobs []schema.Job
		for c := int64(1); c <= convs; c++ {
			msgID++
			jobs = append(jobs, job(schema.TargetSlack, 1, c, msgID, k == 0, marker(c, k)))
		}
		e.publish(jobs...)
		if k == 3 {
			testkit.WaitFor(t, "b delivering", 20*time.Second, func() bool { return b.counter("spookat_worker_jobs_total") > 0 })
			b.stop(t) // SIGTERM while jobs are queued
		}
	}
	e.waitForMarkers(t, 30*time.Second, convs, perConv)
	dups := 0
	for conv, seq := range sequences(e.slack.Posts()) {
		dups += checkOrder(t, conv, seq, perConv)
	}
	if dups != 0 {
		t.Errorf("%d repeats after a graceful stop", dups)
	}
	a.stop(t)
}
