package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"spookat/schema"
	"spookat/schema/testkit"
)

// An erasure at the byte level: after it and an emptied WAL, neither the database nor the WAL
// holds the person's words (their messages, the search index's copy of them, their email),
// while another person's words are still there; the search finds nothing of theirs; what had
// reached Slack is listed.
func TestErasePersonLeavesNoBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	defer s.Close()
	site := addSite(t, s)
	op := addAnn(t, s, site)
	const secret, kept = "Quagmirezebra 4711 is my card number", "Keepsakeotter tells another story"
	n := 0
	say := func(visitor, text string) MessageResult {
		n++
		// The page the conversation started on (conversation_contexts) is the person's too.
		page := &schema.VisitorContext{URL: "https://shop.example/" + visitor + "-private-page", At: 1}
		return submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(visitor), Author: schema.AuthorVisitor, Text: text,
			ClientID: string(rune('a' + n)), Context: page})
	}
	z := say("zoe", secret)
	say("zoe", "and "+secret+" again")
	say("max", kept)
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		if err := tx.exec(`UPDATE visitors SET email = 'zoe.unique.address@example.com' WHERE id = ?`, z.VisitorID); err != nil {
			return err
		}
		if err := tx.exec(`UPDATE conversations SET slack_thread = '1733130000.000100' WHERE id = ?`, z.ConversationID); err != nil {
			return err
		}
		_, _, err := tx.RecordDelivery(&schema.Result{MessageID: z.MessageID, Target: schema.TargetSlack, Status: schema.StatusDelivered, ExternalID: "1733130000.000200"}, false)
		return err
	}))
	testkit.NoErr(t, s.IndexNow(ctx))
	testkit.NoErr(t, s.TruncateWAL(ctx)) // everything in the database file first
	res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "quagmirezebra "})
	testkit.NoErr(t, err)
	if len(res.Hits) != 1 {
		t.Fatalf("before: %d hits", len(res.Hits))
	}

	e, err := s.ErasePerson(ctx, site.ID, PersonSelector{Email: "ZOE.unique.address@example.com"}, nil)
	testkit.NoErr(t, err)
	if e.Visitors != 1 || e.Conversations != 1 || e.Messages != 2 || len(e.Delivered) != 1 || e.Delivered[0].Thread != "1733130000.000100" {
		t.Fatalf("erased %+v", e)
	}
	testkit.NoErr(t, s.TruncateWAL(ctx))
	res, err = s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "quagmirezebra "})
	testkit.NoErr(t, err)
	if len(res.Hits) != 0 || len(res.People) != 0 {
		t.Fatalf("after: %+v", res)
	}
	requireIndexAgrees(t, s)
	var all []byte
	for _, f := range []string{FileName, FileName + "-wal", SearchFileName, SearchFileName + "-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for _, gone := range []string{"Quagmirezebra", "quagmirezebra", "agmirezebra", "card number", "zoe.unique.address", "zoe-private-page"} {
		if bytes.Contains(all, []byte(gone)) {
			t.Errorf("%q is still in the database's bytes", gone)
		}
	}
	for _, there := range []string{"Keepsakeotter", "keepsakeotter", "max-private-page"} {
		if !bytes.Contains(all, []byte(there)) {
			t.Errorf("%q is not in the bytes: the scan sees nothing", there)
		}
	}
	if _, err := s.ErasePerson(ctx, site.ID, PersonSelector{Email: "zoe.unique.address@example.com"}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("erasing again: %v", err)
	}
}
