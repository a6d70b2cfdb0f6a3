package store

import (
	"errors"
	"math/bits"
	"strings"

	"spookat/schema"
)

// MessageOrigin is where a stored message belongs: what a result about it must match.
type MessageOrigin struct {
	ConversationID int64
	SiteID         int64
	Author         schema.Author
	Kind           schema.MessageKind
}

// MessageOrigin looks a message up in the writer's transaction (found is false when there
// is no such message).
func (tx *Tx) MessageOrigin(messageID int64) (o MessageOrigin, found bool, err error) {
	found, err = tx.QueryRow(`SELECT m.conversation_id, c.site_id, m.author, m.kind
		FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.id = ?`,
		[]any{messageID}, &o.ConversationID, &o.SiteID, &o.Author, &o.Kind)
	return o, found, err
}

// RecordDelivery stores a worker's result and returns the state now stored. A final state
// (delivered, dead) is never overwritten by a late "retrying" (a redelivered job, results of
// two workers), so the stored state is what the inbox must show, not the result's; the first
// external id learnt is kept, and with thread the conversation's Slack thread is stored if it
// has none yet (the caller leaves it out for conversations whose thread it knows is stored).
//
// A final state never moves back: delivered stays delivered (a post made cannot be unmade,
// whatever a late or forged result says); dead moves only forward, to delivered, as a replay
// of the dead job does.
//
// A first attempt's result (a post that went through at once: the common case) is most
// likely the message's first: an INSERT that does nothing when the row exists, one statement.
// Any other, or a first attempt's whose row exists (a redelivered job), reads the row, then
// INSERTs or UPDATEs by the key — rather than one upsert with RETURNING: RETURNING runs as a
// trigger, and a statement with one makes SQLite keep a statement journal, whose release
// walked the whole batch's sub-journal for every result (quadratic in a batch of results;
// bench/path.md). It is RecordDeliveries of one.
func (tx *Tx) RecordDelivery(r *schema.Result, thread bool) (status schema.DeliveryStatus, attempts int, err error) {
	var out [1]Recorded
	err = tx.RecordDeliveries([]*schema.Result{r}, []bool{thread}, out[:])
	return out[0].Status, out[0].Attempts, err
}

// recordThread stores the conversation's Slack or Discord thread a result names, unless it
// has one.
func (tx *Tx) recordThread(r *schema.Result) error {
	if r.ThreadID == "" {
		return nil
	}
	switch r.Target {
	case schema.TargetSlack:
		return tx.exec(`UPDATE conversations SET slack_thread = ? WHERE id = ? AND slack_thread = ''`, r.ThreadID, r.ConversationID)
	case schema.TargetDiscord:
		return tx.exec(`UPDATE conversations SET discord_thread = ? WHERE id = ? AND discord_thread = ''`, r.ThreadID, r.ConversationID)
	}
	return nil
}

// Recorded is the state stored for a result once it is recorded.
type Recorded struct {
	Status   schema.DeliveryStatus
	Attempts int
}

// RecordDeliveries records rs in order, as RecordDelivery would one by one (thread[i] is its
// thread argument), and puts what is stored for rs[i] in out[i]. Runs of first attempts go in
// by rows of up to maxDeliveryRows a statement: a statement's own cost (reset, bindings, its
// first opcodes) is most of a row's. A run where a row exists already (a redelivered job) is
// merged row by row as RecordDelivery does; a row the run's INSERT did write then merges with
// itself, unchanged.
func (tx *Tx) RecordDeliveries(rs []*schema.Result, thread []bool, out []Recorded) error {
	for i := 0; i < len(rs); {
		run := 0
		for i+run < len(rs) && run < maxDeliveryRows && rs[i+run].Attempts <= 1 {
			run++
		}
		rows, inserted := 1, false // a later attempt: merged on its own
		if run > 0 {
			rows = 1 << (bits.Len(uint(run)) - 1) // a statement of each power of two: few to keep prepared
			var err error
			if inserted, err = tx.insertDeliveries(rs[i : i+rows]); err != nil {
				return err
			}
		}
		for k := i; k < i+rows; k++ {
			r := rs[k]
			out[k] = Recorded{r.Status, r.Attempts}
			if !inserted {
				var err error
				if out[k].Status, out[k].Attempts, err = tx.mergeDelivery(r); err != nil {
					return err
				}
			}
			if thread[k] {
				if err := tx.recordThread(r); err != nil {
					return err
				}
			}
		}
		i += rows
	}
	return nil
}

// maxDeliveryRows is the most rows an INSERT of RecordDeliveries writes.
const maxDeliveryRows = 32

// insertDeliveryRows[n] stores n results as new rows (n a power of two); a row there already
// is left as it is. OR IGNORE rather than ON CONFLICT DO NOTHING: the same for the key, and a
// statement that cannot abort half way (its NOT NULLs ignore too, and every value bound is
// set) needs no statement journal, which a multi-row INSERT otherwise fills with a copy of
// each page it touches.
var insertDeliveryRows = func() (q [maxDeliveryRows + 1]string) {
	for n := 1; n <= maxDeliveryRows; n *= 2 {
		q[n] = `INSERT OR IGNORE INTO deliveries (message_id, target, status, attempts, last_error, external_id, updated_at) VALUES ` +
			strings.Repeat(`(?, ?, ?, ?, ?, ?, ?), `, n-1) + `(?, ?, ?, ?, ?, ?, ?)`
	}
	return q
}()

// insertDeliveries stores rs as new rows and reports whether every one was new (a row there
// already, or twice in rs, is left as it is).
func (tx *Tx) insertDeliveries(rs []*schema.Result) (all bool, err error) {
	st, err := tx.stmts.get(insertDeliveryRows[len(rs)])
	if err != nil {
		return false, err
	}
	defer st.ClearBindings()
	for k, r := range rs {
		p := k * 7
		if err := errors.Join(st.BindInt64(p+1, r.MessageID), st.BindText(p+2, r.Target), st.BindText(p+3, string(r.Status)),
			st.BindInt64(p+4, int64(r.Attempts)), st.BindText(p+5, r.Error), st.BindText(p+6, r.ExternalID), st.BindInt64(p+7, tx.now)); err != nil {
			return false, err
		}
	}
	if err := st.Exec(); err != nil {
		return false, err
	}
	return tx.c.Changes() == int64(len(rs)), nil
}

// Delivery is one message's delivery state for one target.
type Delivery struct {
	MessageID  int64                 `json:"message_id"`
	Target     string                `json:"target"`
	Status     schema.DeliveryStatus `json:"status"`
	Attempts   int                   `json:"attempts"`
	LastError  string                `json:"last_error,omitempty"`
	ExternalID string                `json:"external_id,omitempty"`
}

// mergeDelivery stores r over the row its message and target have, or as a new row.
func (tx *Tx) mergeDelivery(r *schema.Result) (status schema.DeliveryStatus, attempts int, err error) {
	var old struct {
		status            schema.DeliveryStatus
		attempts          int
		lastErr, external string
	}
	found, err := tx.QueryRow(`SELECT status, attempts, last_error, external_id FROM deliveries WHERE message_id = ? AND target = ?`,
		[]any{r.MessageID, r.Target}, &old.status, &old.attempts, &old.lastErr, &old.external)
	if err != nil {
		return "", 0, err
	}
	status, attempts, lastErr, external := r.Status, r.Attempts, r.Error, r.ExternalID
	if !found {
		_, err = tx.insertDeliveries([]*schema.Result{r})
		return status, attempts, err
	}
	if old.status == schema.StatusDelivered || (r.Status == schema.StatusRetrying && old.status == schema.StatusDead) {
		status = old.status
	}
	attempts = max(attempts, old.attempts)
	if lastErr == "" {
		lastErr = old.lastErr
	}
	if old.external != "" {
		external = old.external
	}
	err = tx.exec(`UPDATE deliveries SET status = ?, attempts = ?, last_error = ?, external_id = ?, updated_at = ?
		WHERE message_id = ? AND target = ?`, status, attempts, lastErr, external, tx.now, r.MessageID, r.Target)
	return status, attempts, err
}
