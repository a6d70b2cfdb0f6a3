package results

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// resultsMsg is a RESULTS message as the recorder reads it: its data, and its acks counted.
type resultsMsg struct {
	jetstream.Msg
	data  []byte
	acked int
}

func (m *resultsMsg) Data() []byte    { return m.data }
func (m *resultsMsg) Subject() string { return "results.test" }
func (m *resultsMsg) Ack() error      { m.acked++; return nil }

// recorderFixture is a real store holding a Slack site, and a recorder writing to it.
type recorderFixture struct {
	s    *store.Store
	site *store.Site
	r    *Recorder
}

func newRecorderFixture(t *testing.T, dir string) *recorderFixture {
	s, err := store.Open(dir, store.Options{})
	testkit.NoErr(t, err)
	t.Cleanup(func() { s.Close() })
	site := &store.Site{Name: "results", Origins: []string{"*"}, SlackToken: "xoxb-r", SlackChannel: "CR"}
	testkit.NoErr(t, s.Write(context.Background(), func(tx *store.Tx) error { return tx.AddSite(site) }))
	r := &Recorder{Store: s, Sites: sites.New([]*store.Site{site}, brakes.New(brakes.Config{}, brakes.Wall())),
		Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Origins: &Origins{}}
	return &recorderFixture{s, site, r}
}

// visitorMessage stores the first message of the visitor whose token hashes to token.
func (f *recorderFixture) visitorMessage(t *testing.T, token string) store.MessageResult {
	done := make(chan store.MessageResult, 1)
	testkit.NoErr(t, f.s.SubmitMessage(&store.MessageRequest{SiteID: f.site.ID, TokenHash: []byte(token),
		Author: schema.AuthorVisitor, Text: "hi", ClientID: token[:4], Done: func(r store.MessageResult) { done <- r }}))
	m := <-done
	testkit.NoErr(t, m.Err)
	return m
}

// slackResult is a worker's RESULTS message: m posted to Slack at the first attempt, in thread.
func (f *recorderFixture) slackResult(t *testing.T, m store.MessageResult, thread string) *resultsMsg {
	line, err := json.Marshal(schema.Result{JobID: schema.JobID(m.MessageID, schema.TargetSlack), Target: schema.TargetSlack,
		SiteID: f.site.ID, ConversationID: m.ConversationID, MessageID: m.MessageID, Status: schema.StatusDelivered,
		Attempts: 1, ExternalID: fmt.Sprint("1700000000.00010", m.MessageID), ThreadID: thread, At: time.Now()})
	testkit.NoErr(t, err)
	return &resultsMsg{data: line}
}

// A batch whose write fails (a trigger of the test's raises in it) is not acked and stores
// nothing, its conversation's Slack thread included; written again (JetStream's redelivery),
// it stores the thread: the recorder counts a thread as stored only once a commit holds it.
func TestThreadStoredWhenAFailedBatchIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := newRecorderFixture(t, dir)
	m := f.visitorMessage(t, "0123456789abcdef0123456789abcdef")

	rw, err := store.OpenConn(dir+"/"+store.FileName, sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	defer rw.Close()
	testkit.NoErr(t, rw.Exec(`CREATE TABLE test_fail (failing INTEGER); INSERT INTO test_fail VALUES (1);
		CREATE TRIGGER test_fail_deliveries BEFORE INSERT ON deliveries WHEN (SELECT failing FROM test_fail)
		BEGIN SELECT RAISE(ABORT, 'the write fails'); END`))

	thread := func() (th string) {
		testkit.NoErr(t, f.s.Read(ctx, func(q store.Querier) error {
			st, err := q.Stmt(`SELECT slack_thread FROM conversations WHERE id = ?`)
			if err != nil {
				return err
			}
			if err := st.BindInt64(1, m.ConversationID); err != nil {
				return err
			}
			if st.Step() {
				th = st.ColumnText(0)
			}
			return st.Err()
		}))
		return th
	}

	msg := f.slackResult(t, m, "1700000000.000001")
	f.r.record(ctx, []jetstream.Msg{msg})
	if msg.acked != 0 || thread() != "" {
		t.Fatalf("after a failed write: acked %d, thread %q; want 0 and none", msg.acked, thread())
	}
	testkit.NoErr(t, rw.Exec(`UPDATE test_fail SET failing = 0`))
	f.r.record(ctx, []jetstream.Msg{msg})
	if msg.acked != 1 || thread() != "1700000000.000001" {
		t.Fatalf("written again: acked %d, thread %q; want 1 and the result's", msg.acked, thread())
	}
}

// A batch whose caller stopped waiting (the edge stopping: Run's context cancelled) may still
// be written by the store afterwards; it is written as it was, whatever the recorder does
// meanwhile (its buffers are not reused for the next batch).
func TestBatchWrittenAfterItsCallerStoppedWaiting(t *testing.T) {
	ctx := context.Background()
	f := newRecorderFixture(t, t.TempDir())
	msgs := []store.MessageResult{f.visitorMessage(t, "0123456789abcdef0123456789abcdef"), f.visitorMessage(t, "fedcba9876543210fedcba9876543210")}

	// The writer busy with another transaction until released.
	started, release := make(chan struct{}), make(chan struct{})
	go func() { _ = f.s.Write(ctx, func(*store.Tx) error { close(started); <-release; return nil }) }()
	<-started
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	f.r.record(stopped, []jetstream.Msg{f.slackResult(t, msgs[0], "")}) // gives up waiting at once; the write stays queued
	next, second := f.slackResult(t, msgs[1], ""), make(chan struct{})
	go func() { f.r.record(ctx, []jetstream.Msg{next}); close(second) }()
	close(release)
	<-second
	testkit.NoErr(t, f.s.Flush(ctx))
	for _, m := range msgs {
		ds, err := f.s.Deliveries(ctx, m.ConversationID)
		testkit.NoErr(t, err)
		if len(ds) != 1 || ds[0].MessageID != m.MessageID || ds[0].Status != schema.StatusDelivered {
			t.Errorf("message %d: deliveries %+v, want its own, delivered", m.MessageID, ds)
		}
	}
}
