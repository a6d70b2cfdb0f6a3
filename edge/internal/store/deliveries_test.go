package store

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"spookat/schema"
	"spookat/schema/testkit"
)

// RecordDeliveries stores what RecordDelivery (one result at a time) stores, and answers the same, for
// batches that mix new first attempts (runs longer than a statement's rows), a first attempt
// repeated within a run and across batches, later attempts, and both targets' threads.
func TestRecordDeliveriesAsOneByOne(t *testing.T) {
	one, rows := openTest(t, t.TempDir(), Options{}), openTest(t, t.TempDir(), Options{})
	defer one.Close()
	defer rows.Close()
	site := addSite(t, one)
	testkit.NoErr(t, rows.Write(context.Background(), func(tx *Tx) error { return tx.AddSite(&Site{Name: "rows", Origins: []string{"*"}}) }))
	var conv int64
	for i := range 50 {
		req := MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"), Author: "visitor",
			Text: "hi", ClientID: fmt.Sprint(i), ConversationID: conv}
		a, b := submit(t, one, req), submit(t, rows, req)
		if a.MessageID != b.MessageID {
			t.Fatalf("the two stores gave message %d ids %d and %d", i, a.MessageID, b.MessageID)
		}
		conv = a.ConversationID
	}
	res := func(msg int64, target string, status schema.DeliveryStatus, attempts int, external string) *schema.Result {
		return &schema.Result{JobID: "j", Target: target, SiteID: site.ID, ConversationID: conv, MessageID: msg,
			Status: status, Attempts: attempts, ExternalID: external, ThreadID: "th-" + target}
	}
	const slack, discord = schema.TargetSlack, schema.TargetDiscord
	var first []*schema.Result
	for m := int64(1); m <= 40; m++ {
		first = append(first, res(m, slack, schema.StatusDelivered, 1, fmt.Sprint("s", m)))
	}
	batches := [][]*schema.Result{
		first, // runs of 32 and 8 rows
		{
			res(1, discord, schema.StatusRetrying, 1, ""),
			res(41, slack, schema.StatusRetrying, 1, ""), res(41, slack, schema.StatusDelivered, 1, "again"), // twice in one run
			res(2, slack, schema.StatusDelivered, 1, "repeated"), // a row from the batch before
			res(42, slack, schema.StatusDead, 1, ""),
			res(1, discord, schema.StatusDelivered, 2, "d1"), // a later attempt between runs
			res(43, slack, schema.StatusDelivered, 1, "s43"), res(44, slack, schema.StatusDelivered, 1, "s44"), res(45, slack, schema.StatusDelivered, 1, "s45"),
			res(3, slack, schema.StatusRetrying, 1, ""), // a late retry of a delivered one, in a run
		},
		{res(42, slack, schema.StatusDelivered, 1, "s42"), res(46, slack, schema.StatusRetrying, 1, ""), res(46, slack, schema.StatusRetrying, 2, "")},
	}
	for bi, batch := range batches {
		want := make([]Recorded, len(batch))
		testkit.NoErr(t, one.Write(context.Background(), func(tx *Tx) error {
			for i, r := range batch {
				r := *r
				var err error
				if want[i].Status, want[i].Attempts, err = tx.RecordDelivery(&r, true); err != nil {
					return err
				}
			}
			return nil
		}))
		got := make([]Recorded, len(batch))
		thread := slices.Repeat([]bool{true}, len(batch))
		testkit.NoErr(t, rows.Write(context.Background(), func(tx *Tx) error { return tx.RecordDeliveries(batch, thread, got) }))
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d answered\n%v\none by one\n%v", bi, got, want)
		}
	}
	stored := func(s *Store) (out []string) {
		testkit.NoErr(t, s.Read(context.Background(), func(q Querier) error {
			st, err := q.Stmt(`SELECT message_id, target, status, attempts, last_error, external_id FROM deliveries ORDER BY message_id, target`)
			if err != nil {
				return err
			}
			for st.Step() {
				out = append(out, fmt.Sprint(st.ColumnInt64(0), st.ColumnText(1), st.ColumnText(2), st.ColumnInt(3), st.ColumnText(4), st.ColumnText(5)))
			}
			if err := st.Err(); err != nil {
				return err
			}
			st, err = q.Stmt(`SELECT slack_thread, discord_thread FROM conversations WHERE id = ?`)
			if err != nil {
				return err
			}
			testkit.NoErr(t, st.BindInt64(1, conv))
			for st.Step() {
				out = append(out, "threads "+st.ColumnText(0)+" "+st.ColumnText(1))
			}
			return st.Err()
		}))
		return out
	}
	a, b := stored(one), stored(rows)
	if len(a) != 48 || !slices.Equal(a, b) {
		t.Fatalf("one by one stored (%d)\n%v\nby rows (%d)\n%v", len(a), a, len(b), b)
	}
}
