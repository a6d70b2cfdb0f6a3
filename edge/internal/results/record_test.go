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

// A batch whose write fails (a trigger of the test's raises in it) is not acked and stores
// nothing, its conversation's Slack thread included; written again (JetStream's redelivery),
// it stores the thread: the recorder counts a thread as stored only once a commit holds it.
func TestThreadStoredWhenAFailedBatchIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	testkit.NoErr(t, err)
	defer s.Close()
	site := &store.Site{Name: "threads", Origins: []string{"*"}, SlackToken: "xoxb-t", SlackChannel: "CT"}
	testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error { return tx.AddSite(site) }))
	done := make(chan store.MessageResult, 1)
	testkit.NoErr(t, s.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"),
		Author: schema.AuthorVisitor, Text: "hi", ClientID: "c1", Done: func(r store.MessageResult) { done <- r }}))
	m := <-done
	testkit.NoErr(t, m.Err)

	rw, err := store.OpenConn(dir+"/"+store.FileName, sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	defer rw.Close()
	testkit.NoErr(t, rw.Exec(`CREATE TABLE test_fail (failing INTEGER); INSERT INTO test_fail VALUES (1);
		CREATE TRIGGER test_fail_deliveries BEFORE INSERT ON deliveries WHEN (SELECT failing FROM test_fail)
		BEGIN SELECT RAISE(ABORT, 'the write fails'); END`))

	line, err := json.Marshal(schema.Result{JobID: schema.JobID(m.MessageID, schema.TargetSlack), Target: schema.TargetSlack,
		SiteID: site.ID, ConversationID: m.ConversationID, MessageID: m.MessageID, Status: schema.StatusDelivered,
		Attempts: 1, ExternalID: "1700000000.000100", ThreadID: "1700000000.000001", At: time.Now()})
	testkit.NoErr(t, err)
	r := &Recorder{Store: s, Sites: sites.New([]*store.Site{site}, brakes.New(brakes.Config{}, brakes.Wall())),
		Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Origins: &Origins{}}
	thread := func() (th string) {
		testkit.NoErr(t, s.Read(ctx, func(q store.Querier) error {
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

	msg := &resultsMsg{data: line}
	r.record(ctx, []jetstream.Msg{msg})
	if msg.acked != 0 || thread() != "" {
		t.Fatalf("after a failed write: acked %d, thread %q; want 0 and none", msg.acked, thread())
	}
	testkit.NoErr(t, rw.Exec(`UPDATE test_fail SET failing = 0`))
	r.record(ctx, []jetstream.Msg{msg})
	if msg.acked != 1 || thread() != "1700000000.000001" {
		t.Fatalf("written again: acked %d, thread %q; want 1 and the result's", msg.acked, thread())
	}
}

// A batch whose caller stopped waiting (the edge stopping: Run's context cancelled) may still
// be written by the store afterwards; it is written as it was, whatever the recorder does
// meanwhile (its buffers are not reused for the next batch).
func TestBatchWrittenAfterItsCallerStoppedWaiting(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(t.TempDir(), store.Options{})
	testkit.NoErr(t, err)
	defer s.Close()
	site := &store.Site{Name: "late", Origins: []string{"*"}, SlackToken: "xoxb-l", SlackChannel: "CL"}
	testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error { return tx.AddSite(site) }))
	var msgs []store.MessageResult
	for i, token := range []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"} {
		done := make(chan store.MessageResult, 1)
		testkit.NoErr(t, s.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte(token),
			Author: schema.AuthorVisitor, Text: "hi", ClientID: fmt.Sprint(i), Done: func(r store.MessageResult) { done <- r }}))
		m := <-done
		testkit.NoErr(t, m.Err)
		msgs = append(msgs, m)
	}
	resultOf := func(m store.MessageResult) *resultsMsg {
		line, err := json.Marshal(schema.Result{JobID: schema.JobID(m.MessageID, schema.TargetSlack), Target: schema.TargetSlack,
			SiteID: site.ID, ConversationID: m.ConversationID, MessageID: m.MessageID, Status: schema.StatusDelivered,
			Attempts: 1, ExternalID: fmt.Sprint("1700000000.00010", m.MessageID), At: time.Now()})
		testkit.NoErr(t, err)
		return &resultsMsg{data: line}
	}
	r := &Recorder{Store: s, Sites: sites.New([]*store.Site{site}, brakes.New(brakes.Config{}, brakes.Wall())),
		Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Origins: &Origins{}}

	// The writer busy with another transaction until released.
	started, release := make(chan struct{}), make(chan struct{})
	go func() { _ = s.Write(ctx, func(*store.Tx) error { close(started); <-release; return nil }) }()
	<-started
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	r.record(stopped, []jetstream.Msg{resultOf(msgs[0])}) // gives up waiting at once; the write stays queued
	second := make(chan struct{})
	go func() { r.record(ctx, []jetstream.Msg{resultOf(msgs[1])}); close(second) }()
	close(release)
	<-second
	testkit.NoErr(t, s.Flush(ctx))
	for _, m := range msgs {
		ds, err := s.Deliveries(ctx, m.ConversationID)
		testkit.NoErr(t, err)
		if len(ds) != 1 || ds[0].MessageID != m.MessageID || ds[0].Status != schema.StatusDelivered {
			t.Errorf("message %d: deliveries %+v, want its own, delivered", m.MessageID, ds)
		}
	}
}
