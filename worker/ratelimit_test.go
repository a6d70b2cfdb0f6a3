package worker_test

import (
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// Realistic Slack (~1 post/s per channel, burst 3): a burst into one channel gets 429s, its
// threads' queued messages go out merged, nothing is lost, order holds, and a calm channel's
// posts go out at once meanwhile.
func TestSlackRateLimitMergesAndSparesOtherChannels(t *testing.T) {
	const perConv = 8
	e := newEnv(t, mock.SlackOptions{Latency: 2 * time.Millisecond, Realistic: true, Rate: 1, Burst: 3})
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "CBUSY"})
	e.putSite(schema.SiteDelivery{SiteID: 2, SlackToken: "xoxb-2", SlackChannel: "CCALM"})
	w := e.start(e.config())

	var jobs []schema.Job
	id := int64(0)
	for k := 0; k < perConv; k++ {
		for _, c := range []int64{1, 2} {
			id++
			jobs = append(jobs, job(schema.TargetSlack, 1, c, id, k == 0, marker(c, k)))
		}
	}
	e.publish(jobs...)
	testkit.WaitFor(t, "a 429", 10*time.Second, func() bool { return e.slack.RateLimited() > 0 })

	calmAt := time.Now()
	e.publish(job(schema.TargetSlack, 2, 3, 1000, true, marker(3, 0)), job(schema.TargetSlack, 2, 3, 1001, false, marker(3, 1)))
	testkit.WaitFor(t, "the calm channel's posts", 10*time.Second, func() bool { return len(sequences(e.slack.Posts())[3]) == 2 })
	if d := time.Since(calmAt); d > 500*time.Millisecond {
		t.Errorf("calm channel took %s while another channel was limited", d)
	}

	testkit.WaitFor(t, "every message of the busy channel", 20*time.Second, func() bool { return countMarkers(e.slack.Posts()) == 2*perConv+2 })
	posts := e.slack.Posts()
	seqs := sequences(posts)
	for _, c := range []int64{1, 2, 3} {
		n := perConv
		if c == 3 {
			n = 2
		}
		if d := checkOrder(t, c, seqs[c], n); d != 0 {
			t.Errorf("conversation %d: %d repeats", c, d)
		}
	}
	merged := 0
	busy := 0
	for _, p := range posts {
		if p.Channel == "CBUSY" {
			busy++
			if len(markerRE.FindAllString(p.Text, -1)) > 1 {
				merged++
			}
		}
	}
	if merged == 0 {
		t.Errorf("no merged post among %d busy-channel posts", busy)
	}
	testkit.WaitFor(t, "all results", 5*time.Second, func() bool { return len(e.results.final(schema.StatusDelivered)) == 2*perConv+2 })
	withMerged := 0
	for _, r := range e.results.snapshot() {
		if r.Merged > 1 {
			withMerged++
		}
	}
	if withMerged == 0 {
		t.Errorf("no result says merged")
	}
	if got := w.counter("spookat_worker_rate_limited_total", "target", "slack"); got < 1 {
		t.Errorf("rate-limited metric %v", got)
	}
	t.Logf("busy channel: %d posts for %d messages (%d merged), %d 429s", busy, 2*perConv, merged, e.slack.RateLimited())
}
