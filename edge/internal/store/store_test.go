package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema"
	"spookat/schema/testkit"
)

func openTest(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	testkit.NoErr(t, err)
	return s
}

func addSite(t *testing.T, s *Store) *Site {
	t.Helper()
	site := &Site{Name: "test", Origins: []string{"*"}}
	testkit.NoErr(t, s.Write(context.Background(), func(tx *Tx) error { return tx.AddSite(site) }))
	return site
}

// submit stores a message and waits for its result.
func submit(t *testing.T, s *Store, req MessageRequest) MessageResult {
	t.Helper()
	ch := make(chan MessageResult, 1)
	req.Done = func(r MessageResult) { ch <- r }
	testkit.NoErr(t, s.SubmitMessage(&req))
	r := <-ch
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r
}

func TestMigrationsFreshAndRerun(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	site := addSite(t, s)
	testkit.NoErr(t, s.Close())
	// Re-opening applies nothing twice and keeps the data.
	s = openTest(t, dir, Options{})
	defer s.Close()
	sites, err := s.Sites(context.Background())
	testkit.NoErr(t, err)
	if len(sites) != 1 || sites[0].Key != site.Key || sites[0].Origins[0] != "*" {
		t.Fatalf("sites after re-open = %+v", sites)
	}
}

func TestMessageIdempotentAndReadable(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	site := addSite(t, s)
	token := []byte("0123456789abcdef0123456789abcdef")
	first := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: token, Author: "visitor", Text: "hi", ClientID: "c1"})
	if !first.First || first.Duplicate || first.MessageID == 0 || first.ConversationID == 0 {
		t.Fatalf("first = %+v", first)
	}
	again := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: token, Author: "visitor", Text: "hi", ClientID: "c1"})
	if !again.Duplicate || again.MessageID != first.MessageID || again.CreatedAt != first.CreatedAt {
		t.Fatalf("resend = %+v, first = %+v", again, first)
	}
	second := submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID,
		Author: "visitor", Text: "there", ClientID: "c2"})
	if second.First || second.MessageID <= first.MessageID {
		t.Fatalf("second = %+v", second)
	}
	// A reader sees both, in order, once the results are out.
	var texts []string
	err := s.MessagesAfter(context.Background(), first.ConversationID, 0, 100, false, func(m *Message) error {
		texts = append(texts, m.Text)
		return nil
	})
	if err != nil || fmt.Sprint(texts) != "[hi there]" {
		t.Fatalf("messages = %v, %v", texts, err)
	}
	v, found, err := s.VisitorByToken(context.Background(), site.ID, token)
	if err != nil || !found || v.ConversationID != first.ConversationID || v.LastMessageID != second.MessageID {
		t.Fatalf("visitor = %+v %v %v", v, found, err)
	}
}

// Concurrent submitters share commits: far fewer commits than messages.
func TestGroupCommit(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	site := addSite(t, s)
	const visitors, each = 50, 20
	var wg sync.WaitGroup
	for v := range visitors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := fmt.Appendf(nil, "visitor-%02d-........................", v)
			var vid, cid int64
			for i := range each {
				r := submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: vid, TokenHash: token, ConversationID: cid,
					Author: "visitor", Text: "x", ClientID: fmt.Sprint(i)})
				vid, cid = r.VisitorID, r.ConversationID
			}
		}()
	}
	wg.Wait()
	s.stats.mu.Lock()
	commits, saved := s.stats.Commits, s.stats.MessagesSaved
	s.stats.mu.Unlock()
	if saved != visitors*each {
		t.Fatalf("saved %d messages, want %d", saved, visitors*each)
	}
	if commits >= saved/2 {
		t.Fatalf("%d commits for %d messages: no group commit", commits, saved)
	}
	t.Logf("%d messages in %d commits", saved, commits)
}

// The watermark is persisted by the writer and read back at open.
func TestWatermarkPersisted(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	s.SetWatermark(43) // the last one is persisted by Close
	s.Close()
	s = openTest(t, dir, Options{})
	defer s.Close()
	if got := s.PublishedThrough(); got != 43 {
		t.Fatalf("published_through = %d, want 43", got)
	}
}

// A full write queue refuses at once (the widget answers "unavailable") instead of growing
// without bound; what was queued is still committed.
func TestFullQueueRefusesAtOnce(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{MaxQueue: 2})
	defer s.Close()
	site := addSite(t, s)
	hold, held := make(chan struct{}), make(chan struct{})
	go s.Write(context.Background(), func(*Tx) error { close(held); <-hold; return nil }) // the writer is busy
	<-held
	results := make(chan MessageResult, 2)
	for i := range 2 {
		req := &MessageRequest{SiteID: site.ID, TokenHash: []byte(fmt.Sprint("tok", i)), Author: "visitor", Text: "x", ClientID: "c",
			Done: func(r MessageResult) { results <- r }}
		if err := s.SubmitMessage(req); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	over := &MessageRequest{SiteID: site.ID, TokenHash: []byte("tok9"), Author: "visitor", Text: "x", ClientID: "c", Done: func(MessageResult) {}}
	if err := s.SubmitMessage(over); err != ErrBusy {
		t.Fatalf("third message with a queue of 2: %v, want ErrBusy", err)
	}
	close(hold)
	for range 2 {
		if r := <-results; r.Err != nil || r.MessageID == 0 {
			t.Fatalf("queued message: %+v", r)
		}
	}
}

// A late "retrying" (a redelivered job, two workers' results) never undoes "delivered", and
// RecordDelivery says what is stored, which is what the inbox shows live.
func TestRecordDeliveryKeepsFinalState(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	site := addSite(t, s)
	m := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"),
		Author: "visitor", Text: "hi", ClientID: "c1"})
	record := func(status schema.DeliveryStatus, attempts int, external string) (schema.DeliveryStatus, int) {
		t.Helper()
		var st schema.DeliveryStatus
		var n int
		err := s.Write(context.Background(), func(tx *Tx) error {
			var err error
			st, n, err = tx.RecordDelivery(&schema.Result{JobID: "j", Target: schema.TargetSlack, SiteID: site.ID,
				ConversationID: m.ConversationID, MessageID: m.MessageID, Status: status, Attempts: attempts,
				ExternalID: external, ThreadID: external}, true)
			return err
		})
		testkit.NoErr(t, err)
		return st, n
	}
	if st, n := record(schema.StatusRetrying, 1, ""); st != schema.StatusRetrying || n != 1 {
		t.Fatalf("first retry stored as %s/%d", st, n)
	}
	if st, n := record(schema.StatusDelivered, 2, "1.000100"); st != schema.StatusDelivered || n != 2 {
		t.Fatalf("delivery stored as %s/%d", st, n)
	}
	if st, n := record(schema.StatusRetrying, 1, ""); st != schema.StatusDelivered || n != 2 {
		t.Fatalf("a late retry turned the delivery into %s/%d", st, n)
	}
	if st, _ := record(schema.StatusDead, 9, ""); st != schema.StatusDelivered {
		t.Fatalf("a dead result after the delivery (late or forged) stored %s", st)
	}
	// A first attempt's result for a message that has one (a job delivered again after a
	// crash): merged, not inserted; the first post's id stays.
	if st, n := record(schema.StatusDelivered, 1, "2.000200"); st != schema.StatusDelivered || n != 9 {
		t.Fatalf("a repeated first attempt stored as %s/%d", st, n)
	}
	ds, err := s.Deliveries(context.Background(), m.ConversationID)
	if err != nil || len(ds) != 1 || ds[0].Status != schema.StatusDelivered || ds[0].ExternalID != "1.000100" {
		t.Fatalf("deliveries = %+v, %v", ds, err)
	}
}

// Once Flush returns, the listeners have had every message committed before it: the stop flushes,
// then drains the publisher, and a batch handed on after Flush returned would have its jobs
// left for the next start.
func TestFlushReturnsAfterListeners(t *testing.T) {
	var handed atomic.Int64
	s, err := Open(t.TempDir(), Options{Listeners: []CommitListener{CommitFunc(func(c []Committed) {
		time.Sleep(5 * time.Millisecond) // a slow consumer: the window where the order shows
		handed.Add(int64(len(c)))
	})}})
	testkit.NoErr(t, err)
	defer s.Close()
	site := &Site{Name: "flush", Origins: []string{"*"}}
	testkit.NoErr(t, s.Write(context.Background(), func(tx *Tx) error { return tx.AddSite(site) }))
	for round := range 20 {
		before := handed.Load()
		for i := range 10 {
			req := &MessageRequest{SiteID: site.ID, TokenHash: fmt.Appendf(nil, "flush-%d", i), Author: "visitor",
				Text: "hi", ClientID: fmt.Sprintf("%d-%d", round, i), Done: func(MessageResult) {}}
			testkit.NoErr(t, s.SubmitMessage(req))
		}
		testkit.NoErr(t, s.Flush(context.Background()))
		if got := handed.Load() - before; got != 10 {
			t.Fatalf("round %d: Flush returned with %d of the 10 messages before it handed to the listeners", round, got)
		}
	}
}

// A start knows whether the last run closed the store: the edge then tells the workers that
// jobs stored before it may be repeats.
func TestUncleanSaysTheLastRunDidNotClose(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	if s.Unclean() {
		t.Error("a new file: unclean")
	}
	testkit.NoErr(t, s.Close())
	s = openTest(t, dir, Options{})
	if s.Unclean() {
		t.Error("after a clean stop: unclean")
	}
	// A run that never closes (killed): the next start, on the same file, finds it running.
	crashed := s
	s = openTest(t, dir, Options{})
	if !s.Unclean() {
		t.Error("after a run that did not close: clean")
	}
	testkit.NoErr(t, s.Close())
	testkit.NoErr(t, crashed.Close())
	s = openTest(t, dir, Options{})
	defer s.Close()
	if s.Unclean() {
		t.Error("after the clean stop that followed: unclean")
	}
}

// A database about to be migrated is copied first, as it was; the newest few copies are kept.
func TestMigrationCopiesTheDatabaseFirst(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	if s.PreMigration != "" {
		t.Errorf("a new database was copied: %s", s.PreMigration)
	}
	testkit.NoErr(t, s.Close())
	migs, err := schema.Migrations()
	testkit.NoErr(t, err)
	older := migs[len(migs)-1].Version - 1
	for range keepPreMigration + 1 {
		// A database as the edge before the last migration left it, with one site.
		db := filepath.Join(dir, FileName)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			testkit.NoErr(t, os.RemoveAll(db+suffix))
		}
		c := databaseAt(t, db, older)
		testkit.NoErr(t, c.Exec(`INSERT INTO sites (key, name, created_at) VALUES ('st_old', 'old', 1)`))
		testkit.NoErr(t, c.Close())
		s = openTest(t, dir, Options{})
		if s.PreMigration == "" {
			t.Fatal("no copy before the migration")
		}
		testkit.NoErr(t, s.Close())
		c, err = OpenConn(s.PreMigration, sqlite3.OPEN_READWRITE)
		testkit.NoErr(t, err)
		st, _, err := c.Prepare(`SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sites)`)
		testkit.NoErr(t, err)
		st.Step()
		if v, n := st.ColumnInt(0), st.ColumnInt(1); v != older || n != 1 {
			t.Errorf("the copy is at version %d with %d sites, want %d with 1", v, n, older)
		}
		st.Close()
		c.Close()
	}
	copies, _ := filepath.Glob(filepath.Join(dir, BackupsDir, "pre-*.db"))
	if len(copies) != keepPreMigration {
		t.Errorf("%d copies kept, want %d: %v", len(copies), keepPreMigration, copies)
	}
}

// A message's author, source and kind are written into its INSERT as literals when they are
// plain words, and bound otherwise; either way the row holds them as given, and a resend
// is found by the same idempotency key.
func TestInsertWordsLiteralOrBound(t *testing.T) {
	for _, tc := range []struct {
		author  schema.Author
		kind    schema.MessageKind
		literal bool
	}{
		{schema.AuthorVisitor, "", true},
		{schema.AuthorOperator, schema.KindTranscript, true},
		{"o'brien", "", false},
		{schema.AuthorVisitor, "x');--", false},
		{"Visitor", "", false},
	} {
		t.Run(string(tc.author)+"/"+string(tc.kind), func(t *testing.T) {
			if _, literal := insertSQL(tc.author, schema.SourceWidget, tc.kind); literal != tc.literal {
				t.Fatalf("literal = %v, want %v", literal, tc.literal)
			}
			s := openTest(t, t.TempDir(), Options{})
			defer s.Close()
			site := addSite(t, s)
			req := MessageRequest{SiteID: site.ID, TokenHash: []byte("tok"), Author: tc.author, Kind: tc.kind,
				Source: schema.SourceWidget, Name: "Ann", Text: "hi", ClientID: "c1"}
			first := submit(t, s, req)
			if again := submit(t, s, req); !again.Duplicate || again.MessageID != first.MessageID {
				t.Fatalf("resend = %+v, first = %+v", again, first)
			}
			var author, source, kind, name string
			err := s.Read(t.Context(), func(q Querier) error {
				st, err := q.Stmt(`SELECT author, source, kind, name FROM messages WHERE id = ?`)
				if err != nil {
					return err
				}
				_, err = queryRow(st, []any{first.MessageID}, &author, &source, &kind, &name)
				return err
			})
			testkit.NoErr(t, err)
			if author != string(tc.author) || source != string(schema.SourceWidget) || kind != string(tc.kind) || name != "Ann" {
				t.Fatalf("stored %q %q %q %q", author, source, kind, name)
			}
		})
	}
}

// Migration 23 moves the pages conversations started on out of conversations: a database
// as version 22 left it keeps each conversation's context, and a conversation without one
// gets none.
func TestConversationContextsMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := databaseAt(t, filepath.Join(dir, FileName), 22)
	testkit.NoErr(t, c.Exec(`INSERT INTO sites (id, key, name, created_at) VALUES (1, 'st_old', 'old', 1);
		INSERT INTO visitors (id, site_id, token_hash, created_at, context) VALUES (1, 1, x'01', 1, '{"url":"https://a.example/now","at":2}'),
			(2, 1, x'02', 1, '');
		INSERT INTO conversations (id, site_id, visitor_id, created_at, updated_at, context) VALUES
			(1, 1, 1, 1, 1, '{"url":"https://a.example/start","at":1}'), (2, 1, 2, 1, 1, '')`))
	testkit.NoErr(t, c.Close())

	s := openTest(t, dir, Options{})
	defer s.Close()
	for id, want := range map[int64]string{1: "https://a.example/start", 2: ""} {
		got, err := s.ConversationContext(ctx, &ConversationSummary{ID: id, SiteID: 1})
		testkit.NoErr(t, err)
		url := ""
		if got.Started != nil {
			url = got.Started.URL
		}
		if url != want {
			t.Errorf("conversation %d started on %q, want %q", id, url, want)
		}
	}
	testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT (SELECT count(*) FROM conversation_contexts), (SELECT count(*) FROM pragma_table_info('conversations') WHERE name = 'context')`)
		if err != nil {
			return err
		}
		defer st.Reset()
		if !st.Step() || st.ColumnInt(0) != 1 || st.ColumnInt(1) != 0 {
			t.Errorf("%d contexts, conversations.context still there: %d", st.ColumnInt(0), st.ColumnInt(1))
		}
		return nil
	}))
	// The visitor without a page reports one: their conversation takes it as where it began.
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		return tx.SetVisitorContext(2, &schema.VisitorContext{URL: "https://a.example/later", At: 3})
	}))
	got, err := s.ConversationContext(ctx, &ConversationSummary{ID: 2, SiteID: 1})
	testkit.NoErr(t, err)
	if got.Started == nil || got.Started.URL != "https://a.example/later" || got.Now == nil || got.Now.URL != "https://a.example/later" {
		t.Errorf("after the page: %+v %+v", got.Started, got.Now)
	}
}

// databaseAt makes a database at path as an edge of schema version left it (the migrations
// up to it, and its user_version), open for the test to add rows.
func databaseAt(t *testing.T, path string, version int) *sqlite3.Conn {
	t.Helper()
	migs, err := schema.Migrations()
	testkit.NoErr(t, err)
	c, err := OpenConn(path, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE)
	testkit.NoErr(t, err)
	for _, m := range migs {
		if m.Version <= version {
			testkit.NoErr(t, c.Exec(m.SQL))
		}
	}
	testkit.NoErr(t, c.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, version)))
	return c
}
