package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"spookat/schema"
	"spookat/schema/testkit"
)

// A report over two seeded days in Berlin: conversations started, messages, first response
// and resolution (median, p90) per day, in total and per operator, ratings, busiest hours;
// an internal note and a conversation of another site count for nothing.
func TestReportOfSeededDays(t *testing.T) {
	ctx := context.Background()
	s, site, _ := searchStore(t)
	other := addSite(t, s)
	berlin, err := time.LoadLocation("Europe/Berlin")
	testkit.NoErr(t, err)
	at := func(day, hour, min int) int64 {
		return time.Date(2026, 11, 29+day, hour, min, 0, 0, berlin).UnixMilli()
	} // day 1: Monday 30 Nov
	n := 0
	say := func(site *Site, visitor string, author schema.Author, name, text string, when int64, internal bool) MessageResult {
		t.Helper()
		n++
		req := MessageRequest{SiteID: site.ID, TokenHash: []byte(visitor), Author: author, Name: name, Text: text, Internal: internal, ClientID: fmt.Sprint(n)}
		if author == schema.AuthorOperator {
			var conv int64
			testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
				st, err := q.Stmt(`SELECT c.id FROM conversations c JOIN visitors v ON v.id = c.visitor_id WHERE v.token_hash = ?`)
				if err != nil {
					return err
				}
				_, err = queryRow(st, []any{[]byte(visitor)}, &conv)
				return err
			}))
			req.ConversationID, req.TokenHash = conv, nil
		}
		r := submit(t, s, req)
		testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
			if err := tx.exec(`UPDATE messages SET created_at = ? WHERE id = ?`, when, r.MessageID); err != nil {
				return err
			}
			return tx.exec(`UPDATE conversations SET created_at = min(created_at, ?), updated_at = max(?, (SELECT max(created_at) FROM messages WHERE conversation_id = ?)) WHERE id = ?`,
				when, when, r.ConversationID, r.ConversationID)
		}))
		return r
	}
	closeAt := func(conv int64, by string, when int64, rating string) {
		t.Helper()
		_, err := s.SetStatus(ctx, site.ID, conv, schema.KindClosed, by, schema.SourceInbox)
		testkit.NoErr(t, err)
		testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
			if err := tx.exec(`UPDATE messages SET created_at = ? WHERE conversation_id = ? AND kind = 'closed'`, when, conv); err != nil {
				return err
			}
			return tx.exec(`UPDATE conversations SET rating = ? WHERE id = ?`, rating, conv)
		}))
	}
	a := say(site, "a", schema.AuthorVisitor, "", "hello", at(1, 9, 0), false)
	say(site, "a", schema.AuthorOperator, "Ann", "hi", at(1, 9, 2), false)
	closeAt(a.ConversationID, "Ann", at(1, 9, 30), "good")
	say(site, "b", schema.AuthorVisitor, "", "question", at(1, 10, 0), false)
	say(site, "b", schema.AuthorOperator, "Bob", "answer", at(1, 10, 10), false)
	c := say(site, "c", schema.AuthorVisitor, "", "problem", at(2, 11, 0), false)
	say(site, "c", schema.AuthorOperator, "Ann", "on it", at(2, 11, 1), false)
	say(site, "c", schema.AuthorOperator, "Ann", "note to self", at(2, 11, 2), true)
	closeAt(c.ConversationID, "Bob", at(2, 12, 0), "bad")
	say(other, "z", schema.AuthorVisitor, "", "another site", at(1, 9, 0), false)

	r, err := s.Report(ctx, site.ID, ReportQuery{From: time.UnixMilli(at(1, 0, 0)), To: time.UnixMilli(at(3, 0, 0)), Loc: berlin})
	testkit.NoErr(t, err)
	min := int64(60_000)
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("buckets", len(r.Buckets), 2)
	d1, d2 := r.Buckets[0], r.Buckets[1]
	check("day 1", []any{d1.Label, d1.Conversations, d1.VisitorMessages, d1.OperatorMessages, d1.RatedGood, d1.RatedBad}, []any{"2026-11-30", 2, 2, 2, 1, 0})
	check("day 1 first response", d1.FirstResponse, Durations{2, 2 * min, 10 * min})
	check("day 1 resolution", d1.Resolution, Durations{1, 30 * min, 30 * min})
	check("day 2", []any{d2.Label, d2.Conversations, d2.VisitorMessages, d2.OperatorMessages, d2.RatedBad}, []any{"2026-12-01", 1, 1, 1, 1})
	check("day 2 first response", d2.FirstResponse, Durations{1, 1 * min, 1 * min})
	check("total first response", r.Total.FirstResponse, Durations{3, 2 * min, 10 * min})
	check("total resolution", r.Total.Resolution, Durations{2, 30 * min, 60 * min})
	check("operators", len(r.Operators), 2)
	ann, bob := r.Operators[0], r.Operators[1]
	check("Ann", []any{ann.Label, ann.Conversations, ann.OperatorMessages, ann.RatedGood, ann.FirstResponse, ann.Resolution},
		[]any{"Ann", 2, 2, 1, Durations{2, 1 * min, 2 * min}, Durations{1, 30 * min, 30 * min}})
	check("Bob", []any{bob.Label, bob.Conversations, bob.OperatorMessages, bob.RatedBad, bob.FirstResponse, bob.Resolution},
		[]any{"Bob", 1, 1, 1, Durations{1, 10 * min, 10 * min}, Durations{1, 60 * min, 60 * min}})
	check("Monday 09h, 10h; Tuesday 11h", []int{r.Hours[0][9], r.Hours[0][10], r.Hours[1][11]}, []int{1, 1, 1})

	w, err := s.Report(ctx, site.ID, ReportQuery{From: time.UnixMilli(at(1, 0, 0)), To: time.UnixMilli(at(3, 0, 0)), Loc: berlin, Weekly: true})
	testkit.NoErr(t, err)
	check("one week from Monday", []any{len(w.Buckets), w.Buckets[0].Label, w.Buckets[0].Conversations}, []any{1, "2026-11-30", 3})
}
