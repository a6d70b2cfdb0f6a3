package store

import (
	"context"
	"encoding/json"

	"spookat/schema"
)

// The visitor's context: the page they are on and their browser (schema.VisitorContext),
// stored as JSON on the visitor (the latest) and on the conversation (where it started).

func contextJSON(c *schema.VisitorContext) string {
	if c == nil {
		return ""
	}
	b, _ := json.Marshal(c) // strings and an int: it cannot fail
	return string(b)
}

func contextFrom(s string) *schema.VisitorContext {
	if s == "" {
		return nil
	}
	var c schema.VisitorContext
	if json.Unmarshal([]byte(s), &c) != nil {
		return nil
	}
	return &c
}

// SetVisitorContext stores the page a visitor is on now. A conversation that started before
// any page was known takes it as where it started.
func (tx *Tx) SetVisitorContext(visitorID int64, c *schema.VisitorContext) error {
	j := contextJSON(c)
	if err := tx.exec(`UPDATE visitors SET context = ? WHERE id = ?`, j, visitorID); err != nil {
		return err
	}
	if j == "" {
		return nil
	}
	return tx.exec(`INSERT OR IGNORE INTO conversation_contexts (conversation_id, context)
		SELECT id, ?1 FROM conversations WHERE visitor_id = ?2`, j, visitorID)
}

// ConversationContext is what the inbox shows beside a conversation about its visitor.
type ConversationContext struct {
	// Now is the page the visitor was last on; Started, the one the conversation began on.
	Now     *schema.VisitorContext `json:"now"`
	Started *schema.VisitorContext `json:"started"`
	// Earlier are the same person's other conversations on the site, newest first: the same
	// verified user id (for a verified visitor), or the same email among unverified visitors
	// (Verified false: a claim, said so in the inbox).
	Earlier []EarlierConversation `json:"earlier"`
}

// EarlierConversation is one of a person's other conversations.
type EarlierConversation struct {
	ID        int64             `json:"id"`
	Status    schema.ConvStatus `json:"status"`
	LastText  string            `json:"last_text"`
	CreatedAt int64             `json:"created_at"`
	UpdatedAt int64             `json:"updated_at"`
	Verified  bool              `json:"verified"` // found by the verified user id; false: by an email, a claim
}

// maxEarlier bounds the earlier conversations shown.
const maxEarlier = 20

// ConversationContext reads the context of a conversation the caller has read (and so checked
// that the operator may see it): its visitor, email and user id come from the summary.
func (s *Store) ConversationContext(ctx context.Context, cv *ConversationSummary) (ConversationContext, error) {
	var out ConversationContext
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT v.context, coalesce(cc.context, '')
			FROM conversations c JOIN visitors v ON v.id = c.visitor_id
			LEFT JOIN conversation_contexts cc ON cc.conversation_id = c.id WHERE c.id = ?`)
		if err != nil {
			return err
		}
		var now, started string
		found, err := queryRow(st, []any{cv.ID}, &now, &started)
		if err != nil || !found {
			return err
		}
		out.Now, out.Started = contextFrom(now), contextFrom(started)
		email, user := cv.VisitorEmail, cv.UserID
		if !cv.Verified {
			user = ""
		}
		if email == "" && user == "" {
			return nil
		}
		// A verified user's conversations join only a verified user's (same id, signed by the
		// site); an email is a claim anyone can make, so it joins only other unverified
		// visitors' conversations, and says so (Verified false): claiming a verified user's id
		// or email never shows their history. "email != ''" repeats the partial index
		// visitors_email's condition so that SQLite may use that index.
		st, err = q.Stmt(`SELECT c.id, c.status, coalesce(m.text, ''), c.created_at, c.updated_at, v.verified
			FROM visitors v JOIN conversations c ON c.visitor_id = v.id LEFT JOIN messages m ON m.id = c.last_message_id
			WHERE v.id IN (SELECT id FROM visitors WHERE site_id = ?1 AND ?2 != '' AND email = ?2 COLLATE NOCASE AND email != '' AND verified = 0
				UNION SELECT id FROM visitors WHERE site_id = ?1 AND ?3 != '' AND user_id = ?3 AND verified = 1)
				AND c.id != ?4
			ORDER BY c.updated_at DESC LIMIT ?5`)
		if err != nil {
			return err
		}
		return eachRow(st, []any{cv.SiteID, email, user, cv.ID, maxEarlier}, func() error {
			var e EarlierConversation
			if err := scan(st, &e.ID, &e.Status, &e.LastText, &e.CreatedAt, &e.UpdatedAt, &e.Verified); err != nil {
				return err
			}
			out.Earlier = append(out.Earlier, e)
			return nil
		})
	})
	if out.Earlier == nil {
		out.Earlier = []EarlierConversation{}
	}
	return out, err
}
