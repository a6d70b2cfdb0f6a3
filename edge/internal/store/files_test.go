package store

import (
	"context"
	"crypto/sha256"
	"strconv"
	"testing"
	"time"

	"spookat/schema"
	"spookat/schema/testkit"
)

// An upload is named, attached by the message that carries it (found with its message and
// conversation), counted in the site's bytes, and read back with the message; a transcript
// is the conversation as the visitor saw it: no internal notes, no transcript requests, an
// attachment by name, in order, the oldest left out past the line limit.
func TestFilesAndTranscript(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	site := addSite(t, s)
	th := sha256.Sum256([]byte("visitor-token"))
	f := &File{Key: "AAAAAAAAAAAAAAAAAAAAAA", SiteID: site.ID, TokenHash: th[:], Name: "shot.png", Type: "image/png", Size: 1234, SHA256: make([]byte, 32)}
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { return tx.InsertFile(f) }))
	got, found, err := s.FileByKey(ctx, f.Key)
	if err != nil || !found || got.MessageID != 0 || got.Name != "shot.png" || string(got.TokenHash) != string(th[:]) {
		t.Fatalf("unsent upload: %+v %v %v", got, found, err)
	}
	first := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: th[:], Author: schema.AuthorVisitor, Text: "hello", ClientID: "c1"})
	conv := first.ConversationID
	sent := submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: conv, Author: schema.AuthorVisitor, ClientID: "c2", File: &got})
	submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorOperator, Name: "Rui", Text: "secret note", Internal: true})
	submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorOperator, Name: "Rui", Text: "Looks fine"})
	req := submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorSystem, Name: "Transcript", Text: "Transcript emailed", Kind: schema.KindTranscript})

	if got, _, _ = s.FileByKey(ctx, f.Key); got.MessageID != sent.MessageID || got.ConversationID != conv {
		t.Fatalf("sent upload: %+v, message %d", got, sent.MessageID)
	}
	if n, err := s.SiteFileBytes(ctx, site.ID, time.Now().Add(-UnsentFileTTL)); err != nil || n != 1234 {
		t.Fatalf("site bytes %d %v", n, err)
	}
	// An upload no message carries counts while it is recent, then is expired; a sent one stays.
	unsent := &File{Key: "BBBBBBBBBBBBBBBBBBBBBB", SiteID: site.ID, TokenHash: th[:], Name: "never.png", Type: "image/png", Size: 500, SHA256: make([]byte, 32)}
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { return tx.InsertFile(unsent) }))
	if n, _ := s.SiteFileBytes(ctx, site.ID, time.Now().Add(-UnsentFileTTL)); n != 1734 {
		t.Fatalf("site bytes with a recent unsent upload: %d, want 1734", n)
	}
	later := time.Now().Add(UnsentFileTTL + time.Minute)
	if n, _ := s.SiteFileBytes(ctx, site.ID, later.Add(-UnsentFileTTL)); n != 1234 {
		t.Fatalf("site bytes once the unsent upload is old: %d, want 1234", n)
	}
	if keys, err := s.ExpireUnsentFiles(ctx, later.Add(-UnsentFileTTL), 10); err != nil || len(keys) != 1 || keys[0] != unsent.Key {
		t.Fatalf("expired %v %v, want the unsent upload alone", keys, err)
	}
	if _, found, _ := s.FileByKey(ctx, unsent.Key); found {
		t.Fatal("an expired upload is still named")
	}
	if _, found, _ := s.FileByKey(ctx, f.Key); !found {
		t.Fatal("a sent file was expired")
	}
	var withFile *schema.File
	if err := s.MessagesAfter(ctx, conv, 0, 10, false, func(m *Message) error {
		if m.ID == sent.MessageID {
			withFile = m.File
		} else if m.File != nil {
			t.Errorf("message %d carries %+v", m.ID, m.File)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if withFile == nil || withFile.ID != f.Key || withFile.Name != "shot.png" || withFile.Size != 1234 {
		t.Fatalf("history's file: %+v", withFile)
	}

	tr, err := s.Transcript(ctx, conv, req.MessageID)
	testkit.NoErr(t, err)
	want := []schema.TranscriptLine{{Author: "visitor", Text: "hello"}, {Author: "visitor", File: "shot.png"}, {Author: "operator", Name: "Rui", Text: "Looks fine"}}
	if len(tr.Lines) != len(want) || tr.Earlier != 0 {
		t.Fatalf("transcript %+v", tr)
	}
	for i, w := range want {
		if l := tr.Lines[i]; l.Author != w.Author || l.Name != w.Name || l.Text != w.Text || l.File != w.File || l.At.IsZero() {
			t.Fatalf("line %d: %+v, want %+v", i, l, w)
		}
	}
	if tr, _ := s.Transcript(ctx, conv, first.MessageID); len(tr.Lines) != 1 {
		t.Fatalf("through the first message: %+v", tr)
	}
	for i := range schema.MaxTranscriptLines + 2 {
		submit(t, s, MessageRequest{SiteID: site.ID, ConversationID: conv, Author: schema.AuthorOperator, Text: "line", ClientID: "x" + strconv.Itoa(i)})
	}
	tr, _ = s.Transcript(ctx, conv, 1<<40)
	if len(tr.Lines) != schema.MaxTranscriptLines || tr.Earlier != 5 || tr.Lines[0].Text != "line" {
		t.Fatalf("a long conversation: %d lines, %d earlier", len(tr.Lines), tr.Earlier)
	}
}
