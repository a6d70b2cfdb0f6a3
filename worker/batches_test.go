package worker_test

import (
	"context"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// One conversation whose Slack channel keeps failing must not hold its partition's acks. Its
// batch stays unacked (its job is still retrying), and the batches after it share
// conversations with it, so each waits for the earlier one's ack (a crash must not repeat an
// earlier job after a later one); that wait is bounded, and the partition's later batches are
// acked while the stuck job still retries.
func TestStuckConversationDoesNotHoldItsPartition(t *testing.T) {
	const rounds = 12
	e := newEnv(t, mock.SlackOptions{Latency: 2 * time.Millisecond})
	e.batched = true
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "CSTUCK"})
	e.putSite(schema.SiteDelivery{SiteID: 2, SlackToken: "xoxb-2", SlackChannel: "C2"})
	e.slack.FailNext("CSTUCK", 1_000_000)
	const stuckConv = 1000
	part := schema.JobPartition(1, stuckConv)
	var convs []int64 // conversations of site 2 in the stuck one's partition
	for c := int64(1); len(convs) < 8; c++ {
		if schema.JobPartition(2, c) == part {
			convs = append(convs, c)
		}
	}
	cfg := e.config()
	cfg.MaxAttempts = 1_000_000
	w := e.start(cfg)

	msgID := int64(0)
	for k := range rounds {
		var jobs []schema.Job
		if k == 0 {
			msgID++
			jobs = append(jobs, job(schema.TargetSlack, 1, stuckConv, msgID, true, marker(stuckConv, 0)))
		}
		for _, c := range convs {
			msgID++
			jobs = append(jobs, job(schema.TargetSlack, 2, c, msgID, k == 0, marker(c, k)))
		}
		e.publish(jobs...)
	}
	e.waitForMarkers(t, 30*time.Second, len(convs), rounds)
	jobsMsgs := func() uint64 {
		s, err := e.js.Stream(context.Background(), schema.StreamJobs)
		testkit.NoErr(t, err)
		return s.CachedInfo().State.Msgs
	}
	testkit.WaitFor(t, "every batch but the stuck one acked", 20*time.Second, func() bool { return jobsMsgs() == 1 })
	if n := w.counter("spookat_worker_queued"); n != 1 {
		t.Errorf("worker holds %v jobs, want the stuck one", n)
	}
	for conv, seq := range sequences(e.slack.Posts()) {
		if conv != stuckConv {
			checkOrder(t, conv, seq, rounds)
		}
	}
	w.stop(t)
}
