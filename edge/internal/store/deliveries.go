package store

import "spookat/schema"

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
// bench/path.md).
func (tx *Tx) RecordDelivery(r *schema.Result, thread bool) (status schema.DeliveryStatus, attempts int, err error) {
	status, attempts = r.Status, r.Attempts
	inserted := false
	if r.Attempts <= 1 {
		err = tx.exec(insertDelivery, r.MessageID, r.Target, r.Status, r.Attempts, r.Error, r.ExternalID, tx.now)
		if err != nil {
			return "", 0, err
		}
		inserted = tx.c.Changes() == 1
	}
	if !inserted {
		if status, attempts, err = tx.mergeDelivery(r); err != nil {
			return "", 0, err
		}
	}
	if thread && r.ThreadID != "" {
		switch r.Target {
		case schema.TargetSlack:
			err = tx.exec(`UPDATE conversations SET slack_thread = ? WHERE id = ? AND slack_thread = ''`, r.ThreadID, r.ConversationID)
		case schema.TargetDiscord:
			err = tx.exec(`UPDATE conversations SET discord_thread = ? WHERE id = ? AND discord_thread = ''`, r.ThreadID, r.ConversationID)
		}
	}
	return status, attempts, err
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

// insertDelivery stores a result as a new row; a row there already is left as it is (and
// Changes says 0).
const insertDelivery = `INSERT INTO deliveries (message_id, target, status, attempts, last_error, external_id, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

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
		err = tx.exec(insertDelivery, r.MessageID, r.Target, status, attempts, lastErr, external, tx.now)
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
