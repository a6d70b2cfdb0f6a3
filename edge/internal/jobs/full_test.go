package jobs_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
	"spookat/edge/internal/jobs"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// A JOBS at its byte budget refuses jobs ("maximum bytes exceeded"): the publisher keeps them
// above the watermark, probes for room about once a second instead of retrying every held
// job every 250 ms, logs the episode once rather than per attempt, and when the budget is
// raised publishes every job exactly once, each conversation in order.
func TestFullJobsHoldsJobsAndRetriesSlowly(t *testing.T) {
	ctx := context.Background()
	br := startBroker(t, schema.StreamLimits{JobsMaxBytes: broker.MinStreamBytes})
	logs := &testkit.LogBuffer{}
	site := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1"}
	p := startPublisher(t, br.NC, jobs.Config{
		Targets: func(int64) *schema.SiteDelivery { return site },
		Log:     slog.New(slog.NewTextHandler(logs, nil)),
	}, nil)

	// 40 conversations × 10 messages of ~300 bytes: about three times what 64 KiB holds.
	const convs, perConv = 40, 10
	var msgs []store.Committed
	for i := range convs * perConv {
		msgs = append(msgs, store.Committed{MessageID: int64(i + 1), ConversationID: int64(100 + i%convs), SiteID: 1,
			Author: schema.AuthorVisitor, Text: strings.Repeat("x", 300), First: i < convs})
	}
	p.Committed(msgs)
	testkit.WaitFor(t, "JOBS full", 20*time.Second, p.Full)

	// Held, not lost: the watermark stays below the first held job, so a restart
	// re-publishes it.
	if wm := p.Watermark(); wm >= int64(len(msgs)) {
		t.Fatalf("watermark %d with jobs held, want below %d", wm, len(msgs))
	}
	if p.Backlog() == 0 {
		t.Fatal("backlog 0 while JOBS refuses jobs")
	}

	// Probing, not spinning: the old 250 ms retry of all 40 held subjects would refuse ~160
	// publishes a second.
	r1 := p.Refused()
	testkit.WaitFor(t, "a probe refused", 10*time.Second, func() bool { return p.Refused() > r1 })
	r1, t1 := p.Refused(), time.Now()
	testkit.WaitFor(t, "three more probes refused", 15*time.Second, func() bool { return p.Refused() >= r1+3 })
	r2, secs := p.Refused(), time.Since(t1).Seconds()
	rate := float64(r2-r1) / secs
	t.Logf("JOBS full: %d publishes refused in %.1fs (%.1f/s) with %d conversations held", r2-r1, secs, rate, convs)
	if rate > 3 {
		t.Fatalf("%d refusals in %.1fs (%.1f/s) while full: the publisher spins on a full JOBS", r2-r1, secs, rate)
	}
	if n := strings.Count(logs.String(), "JOBS is full"); n != 1 {
		t.Fatalf("%d log lines about the full JOBS within a minute, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "publishing jobs failed") {
		t.Fatalf("a full JOBS logged as a publish failure:\n%s", logs.String())
	}

	// Room again: the SRE raises the budget (what the edge does at start with a higher
	// -jobs-max-bytes).
	js, err := jetstream.New(br.NC)
	testkit.NoErr(t, err)
	cfg := schema.StreamConfigs(1, schema.StreamLimits{JobsMaxBytes: 16 << 20})[0]
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "every held job published", 30*time.Second, func() bool {
		return p.Backlog() == 0 && p.Watermark() == int64(len(msgs)) && !p.Full()
	})
	testkit.WaitFor(t, "the end of the episode logged", 5*time.Second, func() bool {
		return strings.Contains(logs.String(), "JOBS has room again")
	})

	seen := map[string]bool{}
	last := map[int64]int64{} // conversation → last message id seen
	for _, j := range storedJobs(t, br.NC) {
		if seen[j.ID] {
			t.Fatalf("job %s stored twice", j.ID)
		}
		seen[j.ID] = true
		if j.MessageID < last[j.ConversationID] {
			t.Fatalf("conversation %d: job of message %d stored after message %d", j.ConversationID, j.MessageID, last[j.ConversationID])
		}
		last[j.ConversationID] = j.MessageID
	}
	if len(seen) != len(msgs) {
		t.Fatalf("%d distinct jobs in JOBS, want %d", len(seen), len(msgs))
	}
}

func TestStreamFull(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"maximum bytes", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}, true},
		{"maximum messages", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"}, true},
		{"other store failure", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "message too large"}, false},
		{"timeout", context.DeadlineExceeded, false},
		{"no responders", jetstream.ErrNoStreamResponse, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := jobs.StreamFull(c.err); got != c.want {
				t.Fatalf("StreamFull(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
