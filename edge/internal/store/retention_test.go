package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"spookat/schema"
	"spookat/schema/testkit"
)

// Retention deletes a site's conversations idle past its days, whole (messages, delivery
// records, attachments, read markers, visitor), a few messages per commit; a conversation
// with recent activity, and every conversation of a site without retention, stay.
func TestRetentionPurgesIdleConversations(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	keep, aged := addSite(t, s), addSite(t, s)
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { _, err := tx.SetRetention(aged.Key, 30); return err }))

	type conv struct {
		site    *Site
		id      int64
		visitor int64
		file    string
	}
	var convs []conv
	for i, site := range []*Site{aged, keep, aged, aged} { // the first has id 1: a cursor of 0 must not end the pass
		th := sha256.Sum256(fmt.Appendf(nil, "visitor-%d", i))
		f := &File{Key: fmt.Sprintf("K%021d", i), SiteID: site.ID, TokenHash: th[:], Name: "a.png", Type: "image/png", Size: 10, SHA256: make([]byte, 32)}
		testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { return tx.InsertFile(f) }))
		first := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: th[:], Author: schema.AuthorVisitor, Text: "hello", ClientID: "c0"})
		for k := 1; k < 7; k++ {
			submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID, Author: schema.AuthorVisitor,
				Text: "more", ClientID: fmt.Sprintf("c%d", k)})
		}
		sent := submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: first.VisitorID, ConversationID: first.ConversationID, Author: schema.AuthorVisitor, ClientID: "f", File: f})
		testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
			if _, _, err := tx.RecordDelivery(&schema.Result{MessageID: sent.MessageID, Target: schema.TargetSlack, Status: schema.StatusDelivered}, false); err != nil {
				return err
			}
			return tx.exec(`INSERT INTO conversation_reads (conversation_id, operator_id, last_read_id) VALUES (?, 1, ?)`, first.ConversationID, sent.MessageID)
		}))
		convs = append(convs, conv{site, first.ConversationID, first.VisitorID, f.Key})
	}
	// The first three were last active 31 days ago (the second is the other site's); the last
	// one yesterday.
	now := time.Now()
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		for _, c := range convs[:3] {
			if err := tx.exec(`UPDATE conversations SET updated_at = ? WHERE id = ?`, now.Add(-31*24*time.Hour).UnixMilli(), c.id); err != nil {
				return err
			}
		}
		return tx.exec(`UPDATE conversations SET updated_at = ? WHERE id = ?`, now.Add(-24*time.Hour).UnixMilli(), convs[3].id)
	}))

	var total Purge
	calls := 0
	for after := int64(0); ; calls++ {
		p, err := s.PurgeExpired(ctx, now, after, 4) // 4 messages a commit: a conversation takes two and a bit
		testkit.NoErr(t, err)
		if p.Messages > 4 {
			t.Fatalf("one commit deleted %d messages, the limit is 4", p.Messages)
		}
		total.Conversations += p.Conversations
		total.Messages += p.Messages
		total.FileKeys = append(total.FileKeys, p.FileKeys...)
		if !p.More {
			break
		}
		after = p.Next
	}
	if total.Conversations != 2 || total.Messages != 16 || len(total.FileKeys) != 2 || calls < 4 {
		t.Fatalf("purged %+v in %d calls, want 2 conversations, 16 messages, 2 files in at least 5 commits", total, calls+1)
	}
	count := func(sql string, args ...any) (n int64) {
		testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
			st, err := q.Stmt(sql)
			if err != nil {
				return err
			}
			_, err = queryRow(st, args, &n)
			return err
		}))
		return n
	}
	for i, c := range convs {
		gone := i == 0 || i == 2
		rows := map[string]int64{
			"conversation": count(`SELECT count(*) FROM conversations WHERE id = ?`, c.id),
			"messages":     count(`SELECT count(*) FROM messages WHERE conversation_id = ?`, c.id),
			"visitor":      count(`SELECT count(*) FROM visitors WHERE id = ?`, c.visitor),
			"file":         count(`SELECT count(*) FROM files WHERE key = ?`, c.file),
			"read markers": count(`SELECT count(*) FROM conversation_reads WHERE conversation_id = ?`, c.id),
		}
		for what, n := range rows {
			if gone && n != 0 || !gone && n == 0 {
				t.Errorf("conversation %d (gone: %v): %d %s rows", i, gone, n, what)
			}
		}
	}
	if n := count(`SELECT count(*) FROM deliveries WHERE message_id NOT IN (SELECT id FROM messages)`); n != 0 {
		t.Errorf("%d delivery records of deleted messages", n)
	}
	// A second pass finds nothing.
	if p, err := s.PurgeExpired(ctx, now, 0, 100); err != nil || p.Messages != 0 || p.More {
		t.Errorf("second pass: %+v %v", p, err)
	}
}
