package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"spookat/schema"
	"spookat/schema/testkit"
)

// Closing and reopening go through the writer as status messages; a change to the status the
// conversation has stores nothing; a visitor's message reopens a closed conversation and says
// so in its commit, once.
func TestStatusChanges(t *testing.T) {
	var mu sync.Mutex
	var commits []Committed
	s := openTest(t, t.TempDir(), Options{Listeners: []CommitListener{CommitFunc(func(cs []Committed) {
		mu.Lock()
		commits = append(commits, cs...)
		mu.Unlock()
	})}})
	defer s.Close()
	site := addSite(t, s)
	first := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"), Author: "visitor", Text: "hi", ClientID: "c1"})
	ctx := context.Background()
	status := func() (st string, last int64) {
		t.Helper()
		err := s.Read(ctx, func(q Querier) error {
			stmt, err := q.Stmt(`SELECT status, last_message_id FROM conversations WHERE id = ?`)
			if err != nil {
				return err
			}
			_, err = queryRow(stmt, []any{first.ConversationID}, &st, &last)
			return err
		})
		testkit.NoErr(t, err)
		return st, last
	}
	lastCommit := func() Committed {
		t.Helper()
		testkit.NoErr(t, s.Flush(ctx))
		mu.Lock()
		defer mu.Unlock()
		return commits[len(commits)-1]
	}

	for _, step := range []struct {
		name    string
		kind    schema.MessageKind
		changed bool
		status  string
	}{
		{"close", schema.KindClosed, true, "closed"},
		{"close again", schema.KindClosed, false, "closed"},
		{"reopen", schema.KindReopened, true, "open"},
		{"reopen again", schema.KindReopened, false, "open"},
		{"close to test the visitor", schema.KindClosed, true, "closed"},
	} {
		t.Run(step.name, func(t *testing.T) {
			// A submit returns at its ack, which comes before the commit's listeners run.
			testkit.NoErr(t, s.Flush(ctx))
			mu.Lock()
			before := len(commits)
			mu.Unlock()
			changed, err := s.SetStatus(ctx, site.ID, first.ConversationID, step.kind, "Ann", schema.SourceSlack)
			if err != nil || changed != step.changed {
				t.Fatalf("changed %v, err %v; want changed %v", changed, err, step.changed)
			}
			st, last := status()
			if st != step.status || last != first.MessageID {
				t.Fatalf("status %q, last message %d; want %q and the visitor's %d (a status message is not a last message)", st, last, step.status, first.MessageID)
			}
			testkit.NoErr(t, s.Flush(ctx))
			mu.Lock()
			got := commits[before:]
			mu.Unlock()
			if !step.changed {
				if len(got) != 0 {
					t.Fatalf("a change to the same status committed %+v", got)
				}
				return
			}
			want := "Closed by Ann in Slack"
			if step.kind == schema.KindReopened {
				want = "Reopened by Ann in Slack"
			}
			if len(got) != 1 || got[0].Kind != step.kind || !got[0].Internal || got[0].Author != schema.AuthorSystem ||
				got[0].Text != want || got[0].Source != schema.SourceSlack {
				t.Fatalf("committed %+v, want one internal %s message %q", got, step.kind, want)
			}
		})
	}

	back := submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID, Author: "visitor", Text: "back", ClientID: "c2"})
	if c := lastCommit(); c.MessageID != back.MessageID || !c.Reopened {
		t.Fatalf("the visitor's message on a closed conversation: %+v, want Reopened", c)
	}
	if st, _ := status(); st != "open" {
		t.Fatalf("status %q after the visitor's message, want open", st)
	}
	var replayed []Committed
	if _, err := s.Unpublished(ctx, first.MessageID, func(cs []Committed) { replayed = append(replayed, cs...) }); err != nil {
		t.Fatal(err)
	}
	if r := replayed[len(replayed)-1]; r.MessageID != back.MessageID || !r.Reopened {
		t.Fatalf("replayed %+v, want the reopening kept (a crash before publishing still tells Slack)", r)
	}
	var read []Message
	if err := s.MessagesAfter(ctx, first.ConversationID, 0, 100, true, func(m *Message) error { read = append(read, *m); return nil }); err != nil {
		t.Fatal(err)
	}
	if m := read[len(read)-1]; m.ID != back.MessageID || !m.Reopened {
		t.Fatalf("read %+v, want it marked reopened (the inbox's line)", m)
	}
	var kinds []schema.MessageKind
	for _, m := range read[1 : len(read)-1] {
		kinds = append(kinds, m.Kind)
	}
	if fmt.Sprint(kinds) != "[closed reopened closed]" {
		t.Fatalf("status messages %v, want [closed reopened closed]", kinds)
	}
	more := submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID, Author: "visitor", Text: "more", ClientID: "c3"})
	if c := lastCommit(); c.MessageID != more.MessageID || c.Reopened {
		t.Fatalf("the next message: %+v, want it not Reopened", c)
	}

	// In one commit, the visitor writes to the closed conversation, an operator then closes
	// it, and the visitor writes again: each message reopens it, the close between stands.
	if _, err := s.SetStatus(ctx, site.ID, first.ConversationID, schema.KindClosed, "Ann", schema.SourceInbox); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.Write(ctx, func(*Tx) error { close(started); <-release; return nil })
	}()
	<-started // the writer is busy: what comes now waits for the same next commit
	visitorDone, closeDone := make(chan MessageResult, 1), make(chan MessageResult, 1)
	if err := s.SubmitMessage(&MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID, Author: "visitor",
		Text: "wait", ClientID: "c4", Done: func(r MessageResult) { visitorDone <- r }}); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitMessage(&MessageRequest{SiteID: site.ID, ConversationID: first.ConversationID, Author: schema.AuthorSystem, Name: "Ann",
		Text: "Closed by Ann", Internal: true, Source: schema.SourceInbox, Kind: schema.KindClosed, Done: func(r MessageResult) { closeDone <- r }}); err != nil {
		t.Fatal(err)
	}
	if err := s.SubmitMessage(&MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID, Author: "visitor",
		Text: "still there?", ClientID: "c5", Done: func(MessageResult) {}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	before := len(commits)
	mu.Unlock()
	close(release)
	testkit.NoErr(t, <-held)
	if v, c := <-visitorDone, <-closeDone; v.Err != nil || c.Err != nil || c.Unchanged {
		t.Fatalf("visitor %+v, close %+v", v, c)
	}
	testkit.NoErr(t, s.Flush(ctx))
	mu.Lock()
	got := commits[before:]
	mu.Unlock()
	if len(got) != 3 || !got[0].Reopened || got[1].Kind != schema.KindClosed || !got[2].Reopened {
		t.Fatalf("committed %+v, want the reopening visitor message, the close, and the visitor's next message reopening it again", got)
	}
	if st, _ := status(); st != "open" {
		t.Fatalf("status %q, want open: the visitor wrote after the close", st)
	}
}

// The snooze tick reopens what is due by the time it is given, once, and leaves alone what a
// later snooze moved.
func TestWakeSnoozed(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	site := addSite(t, s)
	ctx := context.Background()
	now := time.Now()
	conv := func(token string, until time.Duration) int64 {
		r := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(token), Author: "visitor", Text: "hi", ClientID: "c1"})
		if changed, err := s.Snooze(ctx, site.ID, r.ConversationID, now.Add(until), "Ann"); err != nil || !changed {
			t.Fatalf("snooze: %v %v", changed, err)
		}
		return r.ConversationID
	}
	status := func(id int64) (st string) {
		t.Helper()
		if err := s.Read(ctx, func(q Querier) error {
			stmt, err := q.Stmt(`SELECT status FROM conversations WHERE id = ?`)
			if err != nil {
				return err
			}
			_, err = queryRow(stmt, []any{id}, &st)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	a, b := conv("visitor-a-......................", time.Hour), conv("visitor-b-......................", 3*time.Hour)
	for _, step := range []struct {
		name   string
		at     time.Duration
		woken  int
		sa, sb string
	}{
		{"before either", 30 * time.Minute, 0, "snoozed", "snoozed"},
		{"a is due", 2 * time.Hour, 1, "open", "snoozed"},
		{"again: nothing more", 2 * time.Hour, 0, "open", "snoozed"},
		{"b is due", 4 * time.Hour, 1, "open", "open"},
	} {
		t.Run(step.name, func(t *testing.T) {
			n, err := s.WakeSnoozed(ctx, now.Add(step.at), 100)
			if err != nil || n != step.woken {
				t.Fatalf("woke %d (%v), want %d", n, err, step.woken)
			}
			if sa, sb := status(a), status(b); sa != step.sa || sb != step.sb {
				t.Fatalf("a %s, b %s; want %s, %s", sa, sb, step.sa, step.sb)
			}
		})
	}
	// Snoozed again to later: a wake-up computed from the old time changes nothing.
	if _, err := s.Snooze(ctx, site.ID, a, now.Add(5*time.Hour), "Ann"); err != nil {
		t.Fatal(err)
	}
	res := make(chan MessageResult, 1)
	if err := s.SubmitMessage(&MessageRequest{SiteID: site.ID, ConversationID: a, Author: schema.AuthorSystem, Text: "Snooze ended",
		Internal: true, Kind: schema.KindReopened, wakeDue: now.Add(2 * time.Hour).UnixMilli(), Done: func(r MessageResult) { res <- r }}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.Err != nil || !r.Unchanged || status(a) != "snoozed" {
		t.Fatalf("a stale wake-up: %+v, status %s; want unchanged and still snoozed", r, status(a))
	}
}
