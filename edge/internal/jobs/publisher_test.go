package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/files"
	"spookat/edge/internal/jobs"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
)

func TestJobsPerMessageAndWatermark(t *testing.T) {
	br := startBroker(t, schema.StreamLimits{})
	slackSite := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1", NotifyEmail: "team@site.test"}
	p := startPublisher(t, br.NC, jobs.Config{
		Targets: func(id int64) *schema.SiteDelivery {
			if id == 1 {
				return slackSite
			}
			return &schema.SiteDelivery{SiteID: id} // no targets
		},
		InboxURL:    func(conv int64) string { return "http://edge.test/app" },
		VisitorHere: func(conv int64) bool { return conv == 11 },
		Files:       files.NewSigner([]byte("0123456789abcdef0123456789abcdef")),
		PublicURL:   "https://chat.site.test",
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, nil)
	started := &schema.VisitorContext{URL: "https://site.test/pricing", Browser: "Firefox 133 on Windows"}
	p.Committed([]store.Committed{
		{MessageID: 1, ConversationID: 10, SiteID: 1, Author: "visitor", Text: "hello", First: true, Started: started},
		// The visitor of 10 is gone and left an address: the reply is emailed too.
		{MessageID: 2, ConversationID: 10, SiteID: 1, Author: "operator", Name: "Olivia", Text: "hi!", VisitorEmail: "visitor@home.test"},
		{MessageID: 3, ConversationID: 10, SiteID: 1, Author: "operator", Text: "note", Internal: true, VisitorEmail: "visitor@home.test"},
		// The visitor of 11 has the chat open: no email, whatever address they left.
		{MessageID: 4, ConversationID: 11, SiteID: 1, Author: "operator", Text: "from slack", Source: schema.SourceSlack, ClientID: "slack:C1:1.2",
			VisitorEmail: "here@home.test"},
		{MessageID: 5, ConversationID: 12, SiteID: 2, Author: "visitor", Text: "no targets", First: true},
		// A visitor's client id that looks like Slack's changes nothing: the source decides.
		{MessageID: 6, ConversationID: 13, SiteID: 1, Author: "visitor", Text: "hi", Source: schema.SourceWidget, ClientID: "slack:C1:9.9"},
		// An attachment: its jobs carry a signed link under the public URL.
		{MessageID: 7, ConversationID: 13, SiteID: 1, Author: "visitor", File: &schema.File{ID: "k1", Name: "a.png", Type: "image/png", Size: 3}},
		// A transcript request: one email to the visitor, with the conversation; no Slack post.
		{MessageID: 8, ConversationID: 10, SiteID: 1, Author: "system", Name: "Transcript", Text: "Transcript emailed", Kind: schema.KindTranscript,
			VisitorEmail: "visitor@home.test", Transcript: &schema.Transcript{Lines: []schema.TranscriptLine{{Author: "visitor", Text: "hello"}}}},
	})
	if !p.Drain(10 * time.Second) {
		t.Fatalf("backlog %d not drained", p.Backlog())
	}
	if wm := p.Watermark(); wm != 8 {
		t.Fatalf("watermark %d after every job was stored, want 8", wm)
	}

	var ids []string
	byID := map[string]schema.Job{}
	for _, j := range storedJobs(t, br.NC) {
		ids = append(ids, j.ID)
		byID[j.ID] = j.Job
	}
	sort.Strings(ids)
	want := []string{"m1.email", "m1.slack", "m2.email", "m2.slack", "m6.slack", "m7.slack", "m8.email"}
	if len(ids) != len(want) {
		t.Fatalf("jobs %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("jobs %v, want %v", ids, want)
		}
	}
	if j := byID["m2.email"]; j.To != "visitor@home.test" || j.Name != "Olivia" || j.Lane != schema.LaneEmail {
		t.Fatalf("reply email job = %+v", j)
	}
	if j := byID["m1.email"]; j.To != "" || !j.First {
		t.Fatalf("new-conversation email job = %+v (no recipient: it goes to the site's address)", j)
	}
	if j := byID["m1.slack"]; j.Text != "hello" || j.InboxURL == "" || j.SiteID != 1 || j.ConversationID != 10 ||
		j.Context == nil || j.Context.URL != "https://site.test/pricing" || byID["m1.email"].Context == nil {
		t.Fatalf("slack job = %+v", j)
	}
	if j := byID["m2.slack"]; j.Context != nil {
		t.Fatalf("a later message's job carries the context: %+v", j)
	}
	if f := byID["m7.slack"].File; f == nil || f.Name != "a.png" || !strings.HasPrefix(f.URL, "https://chat.site.test/v1/files/k1?exp=") || !strings.Contains(f.URL, "&sig=") {
		t.Fatalf("attachment job's file = %+v", f)
	}
	if j := byID["m8.email"]; j.To != "visitor@home.test" || j.Kind != schema.KindTranscript || j.Transcript == nil ||
		len(j.Transcript.Lines) != 1 || j.Transcript.Lines[0].Text != "hello" {
		t.Fatalf("transcript job = %+v", j)
	}
}

// startPublisher starts a publisher on nc with ledger (nil: windows unrecorded), closed when
// the test ends.
func startPublisher(t *testing.T, nc *nats.Conn, cfg jobs.Config, ledger jobs.Ledger) *jobs.Publisher {
	t.Helper()
	p := jobs.New(cfg)
	testkit.NoErr(t, p.Start(nc, ledger))
	t.Cleanup(p.Close)
	return p
}

// storedJob is a job as JOBS holds it, with the message that carries it.
type storedJob struct {
	schema.Job
	Seq     uint64 // the message's stream sequence
	BatchID string // its Nats-Msg-Id
	Subject string
}

// storedJobs reads every job in JOBS, in stream order, checking each message is a batch as
// documented: a batch id naming its lane and partition, the job count in its header, on its
// partition's subject.
func storedJobs(t *testing.T, nc *nats.Conn) []storedJob {
	t.Helper()
	js, err := jetstream.New(nc)
	testkit.NoErr(t, err)
	var out []storedJob
	edgetest.StoredMsgs(t, js, schema.StreamJobs, func(m *jetstream.RawStreamMsg) {
		seq := m.Sequence
		id := m.Header.Get(jetstream.MsgIDHeader)
		if _, ok := schema.BatchThrough(id); !ok {
			t.Fatalf("seq %d: Nats-Msg-Id %q is not a batch id", seq, id)
		}
		n := 0
		schema.SplitJobs(true, m.Data, func(line []byte) {
			var j schema.Job
			if err := json.Unmarshal(line, &j); err != nil {
				t.Fatalf("seq %d: %v", seq, err)
			}
			part := schema.JobPartition(j.SiteID, j.ConversationID)
			if !strings.HasPrefix(m.Subject, "jobs."+j.Lane+"."+strconv.Itoa(part)+".w.") || !strings.HasSuffix(id, "."+j.Lane+"."+strconv.Itoa(part)) {
				t.Fatalf("seq %d: job %s of %s partition %d in batch %s on %s", seq, j.ID, j.Lane, part, id, m.Subject)
			}
			out = append(out, storedJob{Job: j, Seq: seq, BatchID: id, Subject: m.Subject})
			n++
		})
		if h := m.Header.Get(schema.HeaderJobs); h != strconv.Itoa(n) {
			t.Fatalf("seq %d: %s %q for %d jobs", seq, schema.HeaderJobs, h, n)
		}
	})
	return out
}

// startBroker starts an embedded NATS with the edge's streams in a temporary directory, closed
// when the test ends.
func startBroker(t *testing.T, limits schema.StreamLimits) *broker.Broker {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	testkit.NoErr(t, err)
	br, err := broker.Start(context.Background(), broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth, Limits: limits})
	testkit.NoErr(t, err)
	t.Cleanup(br.Close)
	return br
}

// A window closes once it holds WindowJobs jobs, long before its time; the rest wait for
// theirs (here, the drain).
func TestWindowClosesAtItsJobs(t *testing.T) {
	br := startBroker(t, schema.StreamLimits{})
	site := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1"}
	p := startPublisher(t, br.NC, jobs.Config{
		Targets: func(int64) *schema.SiteDelivery { return site },
		Window:  time.Hour, WindowJobs: 4,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, nil)
	var msgs []store.Committed
	for id := int64(1); id <= 10; id++ {
		msgs = append(msgs, store.Committed{MessageID: id, ConversationID: 100 + id, SiteID: 1, Author: "visitor", Text: "hi"})
	}
	p.Committed(msgs)
	windows := func() map[int64]int { // window end → jobs
		out := map[int64]int{}
		for _, j := range storedJobs(t, br.NC) {
			through, _ := schema.BatchThrough(j.BatchID)
			out[through]++
		}
		return out
	}
	testkit.WaitFor(t, "two full windows stored", 10*time.Second, func() bool { return len(storedJobs(t, br.NC)) >= 8 })
	if w := windows(); len(w) != 2 || w[4] != 4 || w[8] != 4 {
		t.Fatalf("windows (end: jobs) %v, want 4: 4 and 8: 4", w)
	}
	if !p.Drain(10 * time.Second) {
		t.Fatalf("backlog %d not drained", p.Backlog())
	}
	if w := windows(); len(w) != 3 || w[10] != 2 {
		t.Fatalf("windows (end: jobs) %v after the drain, want the last one 10: 2", w)
	}
}
