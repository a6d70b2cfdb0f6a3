package worker_test

import (
	"context"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// A partition whose target is down stops taking jobs at its bound in jobs, whatever the size
// of the batches: the rest stay in JOBS, not in the worker's memory. When the target is back,
// every job goes out, each conversation in order, and the partition takes jobs again.
//
// The worker owns the partition before the outage, as a running worker does when Slack goes
// away: right after it takes one over, it holds back (checkTaint) and takes what comes.
func TestFullPartitionLeavesTheRestInJetStream(t *testing.T) {
	const (
		convs    = 40
		perBatch = 32  // jobs a JOBS message carries
		batches  = 250 // 8,000 jobs: past the bound, in fewer messages than MaxAckPending
	)
	e := newEnv(t, mock.SlackOptions{})
	e.batched = true
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "CDOWN"})
	part := schema.JobPartition(1, 1)
	var ids []int64 // conversations of site 1 in one partition
	for c := int64(1); len(ids) < convs; c++ {
		if schema.JobPartition(1, c) == part {
			ids = append(ids, c)
		}
	}
	cfg := e.config()
	cfg.MaxAttempts = 1_000_000
	cfg.RetryBase, cfg.RetryMax = 200*time.Millisecond, time.Second
	w := e.start(cfg)
	e.publish(job(schema.TargetSlack, 1, ids[0], 1, true, "before the outage"))
	testkit.WaitFor(t, "the first post", 10*time.Second, func() bool { return e.slack.Count() == 1 })
	e.slack.Reset()
	e.slack.FailNext("CDOWN", 1<<30)
	bound := float64(max(4*cfg.ChatInFlight, 1000)) // jobs a partition may hold

	sent := map[int64]int{}
	msgID := int64(1)
	for b := range batches {
		jobs := make([]schema.Job, 0, perBatch)
		for i := range perBatch {
			c := ids[(b*perBatch+i)%convs]
			msgID++
			jobs = append(jobs, job(schema.TargetSlack, 1, c, msgID, sent[c] == 0 && c != ids[0], marker(c, sent[c])))
			sent[c]++
		}
		e.publish(jobs...)
	}

	testkit.WaitFor(t, "the partition full", 30*time.Second, func() bool {
		return w.counter("spookat_worker_partitions_full", "lane", schema.LaneChat) == 1
	})
	if held := w.counter("spookat_worker_queued", "lane", schema.LaneChat); held < bound || held >= bound+perBatch {
		t.Fatalf("worker holds %v jobs at its bound of %v", held, bound)
	}
	cons, err := e.js.Consumer(context.Background(), schema.StreamJobs, schema.JobConsumer(schema.LaneChat, part))
	testkit.NoErr(t, err)
	info, err := cons.Info(context.Background())
	testkit.NoErr(t, err)
	if info.NumPending == 0 {
		t.Fatalf("every JOBS message was handed to the worker (%d ack pending): nothing stayed in JetStream", info.NumAckPending)
	}
	t.Logf("at the bound: %v jobs held, %d messages handed out, %d still in JetStream", bound, info.NumAckPending, info.NumPending)

	e.slack.Reset() // Slack is back
	total := batches * perBatch
	testkit.WaitFor(t, "every job posted", 60*time.Second, func() bool { return countMarkers(e.slack.Posts()) == total })
	for conv, seq := range sequences(e.slack.Posts()) {
		checkOrder(t, conv, seq, sent[conv])
	}
	testkit.WaitFor(t, "the partition taking jobs again and nothing held", 10*time.Second, func() bool {
		return w.counter("spookat_worker_partitions_full", "lane", schema.LaneChat) == 0 &&
			w.counter("spookat_worker_queued", "lane", schema.LaneChat) == 0
	})
	w.stop(t)
}
