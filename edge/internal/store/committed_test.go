package store

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"spookat/schema"
	"spookat/schema/testkit"
)

// recorder is a CommitListener that keeps what it hears.
type recorder struct {
	mu   sync.Mutex
	msgs []Committed
}

func (r *recorder) Committed(c []Committed) {
	r.mu.Lock()
	r.msgs = append(r.msgs, c...)
	r.mu.Unlock()
}

// A commit hands its listeners what the messages' jobs need, read in the same transaction (the
// visitor's address on an operator's reply and a transcript request, the page a conversation
// started on, the transcript); a replay after a crash reads the very same records back.
func TestCommittedCarriesJobFacts(t *testing.T) {
	ctx := context.Background()
	heard := &recorder{}
	s := openTest(t, t.TempDir(), Options{Listeners: []CommitListener{heard}})
	defer s.Close()
	site := addSite(t, s)
	page := &schema.VisitorContext{URL: "https://site.test/pricing", Title: "Pricing"}
	first := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"),
		Author: schema.AuthorVisitor, Text: "hello", Context: page})
	conv := first.ConversationID
	submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorOperator, Name: "Rui", Text: "before the address"})
	if err := s.Write(ctx, func(tx *Tx) error {
		_, err := tx.SetVisitorEmail(site.ID, first.VisitorID, "v@home.test")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: conv, Author: schema.AuthorVisitor, Text: "later"})
	submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorOperator, Name: "Rui", Text: "after"})
	submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorOperator, Text: "note", Internal: true})
	submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorSystem, Name: "Transcript",
		Text: "Transcript emailed", Kind: schema.KindTranscript})
	testkit.NoErr(t, s.Flush(ctx))

	heard.mu.Lock()
	live := heard.msgs
	heard.mu.Unlock()
	if len(live) != 6 {
		t.Fatalf("heard %d messages, want 6", len(live))
	}
	type facts struct {
		email   string
		started bool
		lines   int
	}
	want := []facts{
		{started: true},                  // the first message: where it started
		{},                               // a reply before the visitor left an address
		{},                               // a visitor's later message
		{email: "v@home.test"},           // a reply after
		{email: "v@home.test"},           // a note carries it too: Jobs decides it goes nowhere
		{email: "v@home.test", lines: 4}, // the transcript: what the visitor saw, no note
	}
	for i, c := range live {
		got := facts{email: c.VisitorEmail, started: c.Started != nil}
		if c.Transcript != nil {
			got.lines = len(c.Transcript.Lines)
		}
		if got != want[i] {
			t.Errorf("message %d (%s %q): %+v, want %+v", i+1, c.Author, c.Text, got, want[i])
		}
	}
	if c := live[0]; c.Started == nil || *c.Started != *page {
		t.Errorf("first message started on %+v, want %+v", c.Started, page)
	}

	var replayed []Committed
	if _, err := s.Unpublished(ctx, 0, func(c []Committed) { replayed = append(replayed, c...) }); err != nil {
		t.Fatal(err)
	}
	for i := range live {
		live[i].Origin = nil // the sender's connection: not stored
		if live[i].Replayed || !replayed[i].Replayed {
			t.Errorf("message %d: Replayed %v live, %v replayed", i+1, live[i].Replayed, replayed[i].Replayed)
		}
		live[i].Replayed = true
	}
	// A replay reads the facts as they stand then: the address left since is on the earlier
	// reply too.
	live[1].VisitorEmail = "v@home.test"
	if !reflect.DeepEqual(replayed, live) {
		t.Fatalf("replay differs from the commit:\nreplayed %+v\nlive     %+v", replayed, live)
	}
}

// A Counter hears a commit before its requests are answered, a Listener after: what an
// admission counts (the plans' conversations) is up to date by the time a visitor has its ack.
func TestCountersHearBeforeTheAcks(t *testing.T) {
	counted, heard := &recorder{}, &recorder{}
	s := openTest(t, t.TempDir(), Options{Counters: []CommitListener{counted}, Listeners: []CommitListener{heard}})
	defer s.Close()
	site := addSite(t, s)
	type seen struct{ counted, heard int }
	ch := make(chan seen, 1)
	req := &MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"), Author: schema.AuthorVisitor, Text: "hello",
		Done: func(MessageResult) { // on the writer's goroutine, between the two
			counted.mu.Lock()
			heard.mu.Lock()
			ch <- seen{len(counted.msgs), len(heard.msgs)}
			heard.mu.Unlock()
			counted.mu.Unlock()
		}}
	testkit.NoErr(t, s.SubmitMessage(req))
	if got := <-ch; got != (seen{1, 0}) {
		t.Fatalf("at the ack: counted %d, heard %d; want 1 and 0", got.counted, got.heard)
	}
	testkit.NoErr(t, s.Flush(context.Background()))
	if n := len(heard.msgs); n != 1 {
		t.Fatalf("heard %d after the flush", n)
	}
}
