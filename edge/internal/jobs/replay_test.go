package jobs_test

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/jobs"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// cutLog stands in for the outbox_cuts table: what SaveCut persisted survives the "crash".
type cutLog struct {
	mu    sync.Mutex
	cuts  []int64
	after int64 // windows ending past this are persisted but the edge dies before it hears so
}

func (c *cutLog) PublishedThrough() int64 { return 0 } // the persisted watermark lags: replay from 0
func (c *cutLog) OutboxCuts() []int64     { return c.saved() }
func (c *cutLog) SetWatermark(int64)      {}

func (c *cutLog) SaveCut(through int64, done func(error)) {
	c.mu.Lock()
	if !slices.Contains(c.cuts, through) {
		c.cuts = append(c.cuts, through)
	}
	fail := c.after > 0 && through > c.after
	c.mu.Unlock()
	if fail {
		done(errors.New("killed before the commit was answered"))
		return
	}
	done(nil)
}

func (c *cutLog) saved() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(slices.Values(c.cuts))
}

// A crash after some windows were stored and others only had their end persisted: the next
// start replays every message above the watermark, handed over in other pages than the
// commits were, re-forms the same windows from the persisted ends, and JOBS ends up with
// every job exactly once, each conversation in order.
func TestReplayFormsTheSameBatches(t *testing.T) {
	br := startBroker(t, schema.StreamLimits{})
	site := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1", WebhookURL: "https://hooks.site.test/x"}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const chunks, perChunk, convs = 10, 20, 7
	var msgs []store.Committed
	for i := range chunks * perChunk {
		msgs = append(msgs, store.Committed{MessageID: int64(i + 1), ConversationID: int64(100 + i%convs), SiteID: 1,
			Author: schema.AuthorVisitor, Text: "hello", First: i < convs})
	}

	cuts := &cutLog{after: 120}
	first := startPublisher(t, br.NC, jobs.Config{Targets: func(int64) *schema.SiteDelivery { return site },
		Window: time.Millisecond, Log: quiet}, cuts)
	for k := range chunks {
		n := len(cuts.saved())
		first.Committed(msgs[k*perChunk : (k+1)*perChunk])
		testkit.WaitFor(t, "the chunk's window end persisted", 10*time.Second, func() bool { return len(cuts.saved()) > n })
	}
	testkit.WaitFor(t, "the windows up to 120 stored", 10*time.Second, func() bool { return first.Watermark() >= 120 })
	first.Close() // the kill: windows past 120 persisted their end and were never published
	before := len(storedJobs(t, br.NC))
	if before == 0 || before >= 2*len(msgs) {
		t.Fatalf("%d jobs stored before the crash, want some but not all of %d", before, 2*len(msgs))
	}

	// The persisted watermark lags (it is written every 500 ms): replay from 0.
	second := startPublisher(t, br.NC, jobs.Config{Targets: func(int64) *schema.SiteDelivery { return site }, Log: quiet}, cuts)
	cuts.mu.Lock()
	cuts.after = 0
	cuts.mu.Unlock()
	for i := 0; i < len(msgs); i += 70 {
		second.Committed(msgs[i:min(i+70, len(msgs))])
	}
	second.EndReplay()
	if !second.Drain(10 * time.Second) {
		t.Fatalf("backlog %d not drained", second.Backlog())
	}
	if wm := second.Watermark(); wm != int64(len(msgs)) {
		t.Fatalf("watermark %d, want %d", wm, len(msgs))
	}
	stored := storedJobs(t, br.NC)
	seen := map[string]int{}
	last := map[string]int64{}
	for _, j := range stored {
		seen[j.ID]++
		key := j.Target + "." + strconv.FormatInt(j.ConversationID, 10)
		if j.MessageID < last[key] {
			t.Errorf("%s: message %d stored after %d", key, j.MessageID, last[key])
		}
		last[key] = j.MessageID
	}
	for _, m := range msgs {
		for _, target := range []string{schema.TargetSlack, schema.TargetWebhook} {
			if n := seen[schema.JobID(m.MessageID, target)]; n != 1 {
				t.Errorf("job %s stored %d times, want once", schema.JobID(m.MessageID, target), n)
			}
		}
	}
	t.Logf("%d jobs stored before the crash, %d after the replay, in %d windows", before, len(stored), len(cuts.saved()))
}

// A window whose batch for a partition would pass schema.BatchMaxBytes ends before the message
// that would overflow it: every batch stays under the bound (a job larger than it travels
// alone), each conversation in order.
func TestBatchesStayUnderTheirByteBound(t *testing.T) {
	br := startBroker(t, schema.StreamLimits{})
	site := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1"}
	cuts := &cutLog{}
	p := startPublisher(t, br.NC, jobs.Config{Targets: func(int64) *schema.SiteDelivery { return site },
		Window: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, cuts)
	var msgs []store.Committed
	for i := range 60 {
		text := strings.Repeat("x", 3000) // ~3 KB a job: a 32 KiB batch holds about ten
		if i == 30 {
			text = strings.Repeat("é", schema.MaxTextRunes*5/4) // larger than a batch on its own
		}
		msgs = append(msgs, store.Committed{MessageID: int64(i + 1), ConversationID: 5, SiteID: 1,
			Author: schema.AuthorVisitor, Text: text, First: i == 0})
	}
	p.Committed(msgs)
	if !p.Drain(10 * time.Second) {
		t.Fatalf("backlog %d not drained", p.Backlog())
	}
	batches := map[string]int{}
	var ids []int64
	for _, j := range storedJobs(t, br.NC) {
		batches[j.BatchID]++
		ids = append(ids, j.MessageID)
	}
	if !slices.IsSorted(ids) || len(ids) != len(msgs) {
		t.Fatalf("stored message ids %v, want 1..%d in order", ids, len(msgs))
	}
	if len(batches) < 6 {
		t.Fatalf("%d batches for 60 jobs of ~3 KB, want the window cut by size", len(batches))
	}
	js, err := jetstream.New(br.NC)
	testkit.NoErr(t, err)
	edgetest.StoredMsgs(t, js, schema.StreamJobs, func(m *jetstream.RawStreamMsg) {
		if n := m.Header.Get(schema.HeaderJobs); len(m.Data) > schema.BatchMaxBytes && n != "1" {
			t.Errorf("batch %s: %d bytes with %s jobs, over the %d bound", m.Header.Get(jetstream.MsgIDHeader), len(m.Data), n, schema.BatchMaxBytes)
		}
	})
	t.Logf("60 jobs in %d batches, %d windows", len(batches), len(cuts.saved()))
}
