package store

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"spookat/schema"
)

// The operator inbox's reads and writes: login, sessions, API tokens, conversations as the
// inbox lists them, site settings. Every read that takes an operator id checks membership in
// SQL, so a query can never return another site's rows.

// ErrNotFound is returned when a row does not exist or the operator may not see it.
var ErrNotFound = errors.New("not found")

// OperatorLogin checks an email and password. found is false for an unknown email or a wrong
// password (the caller cannot tell which). bcrypt runs even for an unknown email, so the
// answer takes as long either way.
func (s *Store) OperatorLogin(ctx context.Context, email, password string) (op Operator, ok bool, err error) {
	var hash string
	var found bool
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT id, email, name, password_hash FROM operators WHERE email = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{strings.TrimSpace(email)}, &op.ID, &op.Email, &op.Name, &hash)
		return err
	})
	if err != nil {
		return Operator{}, false, err
	}
	if !found {
		hash = dummyHash
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil || !found {
		return Operator{ID: op.ID}, false, nil // the id of an account a wrong password was tried on (0: none)
	}
	return op, true, nil
}

// dummyHash is a bcrypt hash of nothing anyone types, compared against for unknown emails.
var dummyHash = func() string {
	h, _ := bcrypt.GenerateFromPassword([]byte("\x00no operator has this email\x00"), bcrypt.DefaultCost)
	return string(h)
}()

// AddSession stores a session (token hash, CSRF token) for an operator.
func (tx *Tx) AddSession(tokenHash []byte, operatorID int64, csrf string, expiresAt int64) error {
	_ = tx.exec(`DELETE FROM sessions WHERE expires_at < ?`, tx.now) // sweep old ones; cheap, rare
	return tx.exec(`INSERT INTO sessions (token_hash, operator_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		tokenHash, operatorID, csrf, tx.now, expiresAt)
}

// DeleteSession removes a session (logout).
func (tx *Tx) DeleteSession(tokenHash []byte) error {
	return tx.exec(`DELETE FROM sessions WHERE token_hash = ?`, tokenHash)
}

// SessionOperator finds the operator of a live session and its CSRF token.
func (s *Store) SessionOperator(ctx context.Context, tokenHash []byte, now int64) (op Operator, csrf string, found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT o.id, o.email, o.name, s.csrf FROM sessions s JOIN operators o ON o.id = s.operator_id
			WHERE s.token_hash = ? AND s.expires_at > ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{tokenHash, now}, &op.ID, &op.Email, &op.Name, &csrf)
		return err
	})
	return op, csrf, found, err
}

// APIToken is an operator's API token as listed (the token itself is shown once, at creation).
type APIToken struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	CreatedAt int64  `json:"created_at"`
}

// AddAPIToken stores a token hash for an operator and returns its id.
func (tx *Tx) AddAPIToken(operatorID int64, tokenHash []byte, name string) (int64, error) {
	var id int64
	_, err := tx.QueryRow(`INSERT INTO api_tokens (operator_id, token_hash, name, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		[]any{operatorID, tokenHash, name, tx.now}, &id)
	return id, err
}

// DeleteAPIToken revokes one of an operator's tokens and returns its hash (nil when the
// operator has no such token), so the sockets opened with it can be closed too.
func (tx *Tx) DeleteAPIToken(operatorID, id int64) (tokenHash []byte, err error) {
	_, err = tx.QueryRow(`DELETE FROM api_tokens WHERE id = ? AND operator_id = ? RETURNING token_hash`,
		[]any{id, operatorID}, &tokenHash)
	return tokenHash, err
}

// APITokens lists an operator's tokens.
func (s *Store) APITokens(ctx context.Context, operatorID int64) ([]APIToken, error) {
	return readList(ctx, s, `SELECT id, name, created_at FROM api_tokens WHERE operator_id = ? ORDER BY id`,
		[]any{operatorID}, func(t *APIToken) []any { return []any{&t.ID, &t.Name, &t.CreatedAt} })
}

// TokenOperator finds the operator an API token belongs to.
func (s *Store) TokenOperator(ctx context.Context, tokenHash []byte) (op Operator, found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT o.id, o.email, o.name FROM api_tokens t JOIN operators o ON o.id = t.operator_id
			WHERE t.token_hash = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{tokenHash}, &op.ID, &op.Email, &op.Name)
		return err
	})
	return op, found, err
}

// CSRFEqual compares CSRF tokens in constant time.
func CSRFEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// SiteRef is a site as an operator's site list shows it.
type SiteRef struct {
	ID   int64  `json:"id"`
	Key  string `json:"key"`
	Name string `json:"name"`
	Role Role   `json:"role"` // the operator's in the site
}

// OperatorSites lists the sites an operator is a member of.
func (s *Store) OperatorSites(ctx context.Context, operatorID int64) ([]SiteRef, error) {
	return readList(ctx, s, `SELECT s.id, s.key, s.name, m.role FROM site_members m JOIN sites s ON s.id = m.site_id
			WHERE m.operator_id = ? ORDER BY s.name, s.id`,
		[]any{operatorID}, func(r *SiteRef) []any { return []any{&r.ID, &r.Key, &r.Name, (*string)(&r.Role)} })
}

// IsMember reports whether an operator is a member of a site.
func (s *Store) IsMember(ctx context.Context, operatorID, siteID int64) (bool, error) {
	var found bool
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT 1 FROM site_members WHERE site_id = ? AND operator_id = ?`)
		if err != nil {
			return err
		}
		var one int64
		found, err = queryRow(st, []any{siteID, operatorID}, &one)
		return err
	})
	return found, err
}

// ConversationSummary is one row of the inbox's conversation list.
type ConversationSummary struct {
	ID            int64             `json:"id"`
	SiteID        int64             `json:"site_id"`
	Status        schema.ConvStatus `json:"status"`
	VisitorEmail  string            `json:"visitor_email,omitempty"`
	VisitorName   string            `json:"visitor_name,omitempty"`
	UserID        string            `json:"user_id,omitempty"` // the site's id of its logged-in user (identify)
	Verified      bool              `json:"verified"`          // user_id was signed with the site's identity secret
	LastMessageID int64             `json:"last_message_id"`
	LastAuthor    schema.Author     `json:"last_author"`
	LastText      string            `json:"last_text"`
	LastInternal  bool              `json:"last_internal"`
	LastFile      string            `json:"last_file,omitempty"` // the last message's attachment, by name
	Unread        bool              `json:"unread"`
	VisitorReadID int64             `json:"visitor_read_id"`  // the visitor has seen the messages up to this id
	Rating        string            `json:"rating,omitempty"` // the visitor's: good or bad
	RatingComment string            `json:"rating_comment,omitempty"`
	AssigneeID    int64             `json:"assignee_id"`             // 0: nobody
	AssigneeName  string            `json:"assignee_name,omitempty"` // the operator's name, else email
	SnoozedUntil  int64             `json:"snoozed_until,omitempty"` // Unix ms, while snoozed
	CreatedAt     int64             `json:"created_at"`
	UpdatedAt     int64             `json:"updated_at"`
}

const summaryColumns = `c.id, c.site_id, c.status, v.email, v.name, coalesce(v.user_id, ''), v.verified, c.last_message_id, coalesce(m.author, ''),
	coalesce(m.text, ''), coalesce(m.internal, 0), coalesce(f.name, ''), c.last_message_id > coalesce(r.last_read_id, 0), c.visitor_read_id, c.rating, c.rating_comment, c.assignee_id, coalesce(nullif(o.name, ''), o.email, ''), c.snoozed_until, c.created_at, c.updated_at`

// summaryJoins are the tables summaryColumns read beside conversations c (?1: the operator).
const summaryJoins = `JOIN site_members sm ON sm.site_id = c.site_id AND sm.operator_id = ?1
			JOIN visitors v ON v.id = c.visitor_id
			LEFT JOIN messages m ON m.id = c.last_message_id
			LEFT JOIN files f ON f.id = m.file_id
			LEFT JOIN conversation_reads r ON r.conversation_id = c.id AND r.operator_id = ?1
			LEFT JOIN operators o ON o.id = c.assignee_id`

func (c *ConversationSummary) dest() []any {
	return []any{&c.ID, &c.SiteID, &c.Status, &c.VisitorEmail, &c.VisitorName, &c.UserID, &c.Verified, &c.LastMessageID, &c.LastAuthor, &c.LastText,
		&c.LastInternal, &c.LastFile, &c.Unread, &c.VisitorReadID, &c.Rating, &c.RatingComment, &c.AssigneeID, &c.AssigneeName, &c.SnoozedUntil, &c.CreatedAt, &c.UpdatedAt}
}

// Assignee filters of Conversations.
const (
	AnyAssignee = -1 // every conversation
	Unassigned  = 0  // those assigned to nobody
)

// Conversations lists a site's conversations, newest activity first. status is open,
// snoozed, closed or "" for all; assignee an operator id, Unassigned or AnyAssignee. The
// operator must be a member of the site (checked in the query: no rows).
func (s *Store) Conversations(ctx context.Context, operatorID, siteID int64, status schema.ConvStatus, assignee int64, limit int) ([]ConversationSummary, error) {
	return readList(ctx, s, `SELECT `+summaryColumns+`
			FROM conversations c `+summaryJoins+`
			WHERE c.site_id = ?2 AND (?3 = '' OR c.status = ?3) AND (?5 < 0 OR c.assignee_id = ?5)
			ORDER BY c.updated_at DESC, c.id DESC LIMIT ?4`,
		[]any{operatorID, siteID, status, limit, assignee}, (*ConversationSummary).dest)
}

// SiteUnread is one of an operator's sites and how many of its open conversations hold
// messages the operator has not read.
type SiteUnread struct {
	SiteID int64 `json:"site_id"`
	Unread int   `json:"unread"`
}

// SiteUnreads counts SiteUnread for every site of the operator's (0 for none unread), in
// the order of OperatorSites.
func (s *Store) SiteUnreads(ctx context.Context, operatorID int64) ([]SiteUnread, error) {
	return readList(ctx, s, `SELECT sm.site_id, count(c.id) FROM site_members sm JOIN sites s ON s.id = sm.site_id
			LEFT JOIN conversations c ON c.site_id = sm.site_id AND c.status = 'open' AND c.last_message_id > coalesce(
				(SELECT r.last_read_id FROM conversation_reads r WHERE r.conversation_id = c.id AND r.operator_id = ?1), 0)
			WHERE sm.operator_id = ?1 GROUP BY sm.site_id ORDER BY s.name, s.id`,
		[]any{operatorID}, func(u *SiteUnread) []any { return []any{&u.SiteID, &u.Unread} })
}

// Member is an operator of a site, as teammates see them.
type Member struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
	Role  Role   `json:"role"`
}

// SiteMembers lists the operators of a site, by name.
func (s *Store) SiteMembers(ctx context.Context, siteID int64) ([]Member, error) {
	return readList(ctx, s, `SELECT o.id, o.name, o.email, sm.role FROM site_members sm JOIN operators o ON o.id = sm.operator_id
			WHERE sm.site_id = ? ORDER BY coalesce(nullif(o.name, ''), o.email) COLLATE NOCASE, o.id`,
		[]any{siteID}, func(m *Member) []any { return []any{&m.ID, &m.Name, &m.Email, (*string)(&m.Role)} })
}

// Conversation reads one conversation the operator may see; ErrNotFound otherwise.
func (s *Store) Conversation(ctx context.Context, operatorID, conversationID int64) (ConversationSummary, error) {
	var c ConversationSummary
	var found bool
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT ` + summaryColumns + `
			FROM conversations c ` + summaryJoins + `
			WHERE c.id = ?2`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{operatorID, conversationID}, c.dest()...)
		return err
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return c, err
}

// Deliveries lists the delivery state of every message of a conversation.
func (s *Store) Deliveries(ctx context.Context, conversationID int64) ([]Delivery, error) {
	return readList(ctx, s, `SELECT d.message_id, d.target, d.status, d.attempts, d.last_error, d.external_id
			FROM deliveries d JOIN messages m ON m.id = d.message_id WHERE m.conversation_id = ? ORDER BY d.message_id, d.target`,
		[]any{conversationID}, func(d *Delivery) []any {
			return []any{&d.MessageID, &d.Target, &d.Status, &d.Attempts, &d.LastError, &d.ExternalID}
		})
}

// MarkRead records that an operator has read a conversation up to a message id.
func (tx *Tx) MarkRead(operatorID, conversationID, messageID int64) error {
	return tx.exec(`INSERT INTO conversation_reads (conversation_id, operator_id, last_read_id) VALUES (?, ?, ?)
		ON CONFLICT (conversation_id, operator_id) DO UPDATE SET last_read_id = max(last_read_id, excluded.last_read_id)`,
		conversationID, operatorID, messageID)
}

// MarkVisitorRead moves the visitor's read marker of a conversation forward to messageID, or
// to the conversation's last message if that is lower. It returns the marker after the
// update and whether it moved.
func (tx *Tx) MarkVisitorRead(conversationID, messageID int64) (marker int64, moved bool, err error) {
	found, err := tx.QueryRow(`UPDATE conversations SET visitor_read_id = min(?1, last_message_id)
		WHERE id = ?2 AND visitor_read_id < min(?1, last_message_id) RETURNING visitor_read_id`,
		[]any{messageID, conversationID}, &marker)
	return marker, found, err
}

// RateConversation stores the visitor's rating of a closed conversation, once. rated is false
// when the conversation is open or already rated.
func (tx *Tx) RateConversation(conversationID int64, rating, comment string) (rated bool, err error) {
	var id int64
	return tx.QueryRow(`UPDATE conversations SET rating = ?, rating_comment = ?
		WHERE id = ? AND status = 'closed' AND rating = '' RETURNING id`, []any{rating, comment, conversationID}, &id)
}

// SetVisitorEmail stores the email a visitor left. found is false when the visitor is not
// stored yet (visitors are stored with their first message).
func (tx *Tx) SetVisitorEmail(siteID, visitorID int64, email string) (found bool, err error) {
	var id int64
	return tx.QueryRow(`UPDATE visitors SET email = ? WHERE id = ? AND site_id = ? RETURNING id`,
		[]any{email, visitorID, siteID}, &id)
}

// SiteByID reads one site with its secrets (the caller decides what to show).
func (s *Store) SiteByID(ctx context.Context, id int64) (*Site, error) {
	var r siteRow
	var found bool
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT ` + siteColumns + ` FROM sites WHERE id = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{id}, r.dest()...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return r.site(), nil
}

// UpdateSite writes a site's settings (every field of s but id, key and created_at).
func (tx *Tx) UpdateSite(s *Site) error {
	return tx.exec(`UPDATE sites SET name = ?, origins = ?, slack_token = ?, slack_channel = ?, slack_signing_secret = ?,
		discord_webhook = ?, webhook_url = ?, webhook_secret = ?, notify_email = ?, widget = ?, identity_secret = ?, retention_days = ?,
		discord_bot_token = ? WHERE id = ?`,
		s.Name, strings.Join(s.Origins, "\n"), s.SlackToken, s.SlackChannel, s.SlackSigningSecret,
		s.DiscordWebhook, s.WebhookURL, s.WebhookSecret, s.NotifyEmail, widgetJSON(s.Widget), s.IdentitySecret, s.RetentionDays,
		s.DiscordBotToken, s.ID)
}

// ConversationByThread finds the conversation of a site whose Slack thread is threadTS.
func (s *Store) ConversationByThread(ctx context.Context, siteID int64, threadTS string) (id int64, found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT id FROM conversations WHERE slack_thread = ? AND slack_thread != '' AND site_id = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{threadTS, siteID}, &id)
		return err
	})
	return id, found, err
}

// ConversationByDiscord finds the conversation of a site a Discord reply belongs to: the one
// whose forum thread is thread, or, in a plain channel, the one one of whose posts (a
// delivered message's Discord id) replyTo is.
func (s *Store) ConversationByDiscord(ctx context.Context, siteID int64, thread, replyTo string) (id int64, found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		if thread != "" {
			st, err := q.Stmt(`SELECT id FROM conversations WHERE discord_thread = ? AND discord_thread != '' AND site_id = ?`)
			if err != nil {
				return err
			}
			if found, err = queryRow(st, []any{thread, siteID}, &id); err != nil || found {
				return err
			}
		}
		if replyTo == "" {
			return nil
		}
		st, err := q.Stmt(`SELECT c.id FROM deliveries d JOIN messages m ON m.id = d.message_id JOIN conversations c ON c.id = m.conversation_id
			WHERE d.target = 'discord' AND d.external_id = ? AND d.external_id != '' AND c.site_id = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{replyTo, siteID}, &id)
		return err
	})
	return id, found, err
}

// HasMessage says whether a conversation holds a message from source with this client id.
func (s *Store) HasMessage(ctx context.Context, conversationID int64, source schema.Source, clientID string) (found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT 1 FROM messages WHERE conversation_id = ? AND source = ? AND client_id = ?`)
		if err != nil {
			return err
		}
		var one int
		found, err = queryRow(st, []any{conversationID, string(source), clientID}, &one)
		return err
	})
	return found, err
}

// SetStatus closes (schema.KindClosed) or reopens (schema.KindReopened) a conversation
// through the writer: the change and a status message saying who made it, where, in one
// commit. The message is internal (the visitor gets the conversation's state instead) and
// its jobs carry the change to Slack, Discord and webhooks. A conversation that has the
// status already is left as it is: changed is false, and nothing is stored or sent.
func (s *Store) SetStatus(ctx context.Context, siteID, conversationID int64, kind schema.MessageKind, by string, source schema.Source) (changed bool, err error) {
	verb := "Closed"
	if kind == schema.KindReopened {
		verb = "Reopened"
	}
	text := verb + " by " + by
	switch source {
	case schema.SourceSlack:
		text += " in Slack"
	case schema.SourceDiscord:
		text += " in Discord"
	}
	return s.change(ctx, &MessageRequest{SiteID: siteID, ConversationID: conversationID, Author: schema.AuthorSystem,
		Name: by, Text: text, Internal: true, Source: source, Kind: kind})
}

// Snooze snoozes a conversation until a time, as SetStatus closes one: it reopens by itself
// then (WakeSnoozed), or at the visitor's next message. Snoozing it again moves the time.
func (s *Store) Snooze(ctx context.Context, siteID, conversationID int64, until time.Time, by string) (changed bool, err error) {
	return s.change(ctx, &MessageRequest{SiteID: siteID, ConversationID: conversationID, Author: schema.AuthorSystem,
		Name: by, Text: "Snoozed by " + by + " until " + until.UTC().Format("Mon 2 Jan 15:04 MST"), Internal: true,
		Source: schema.SourceInbox, Kind: schema.KindSnoozed, SnoozeUntil: until.UnixMilli()})
}

// Assign assigns a conversation to an operator (0: to nobody) named assignee, through the
// writer with an internal message of kind assigned that no target gets. The caller checks
// that the operator is a member of the conversation's site.
func (s *Store) Assign(ctx context.Context, siteID, conversationID, operatorID int64, assignee, by string) (changed bool, err error) {
	text := "Unassigned by " + by
	if operatorID != 0 {
		text = "Assigned to " + assignee + " by " + by
	}
	return s.change(ctx, &MessageRequest{SiteID: siteID, ConversationID: conversationID, Author: schema.AuthorSystem,
		Name: by, Text: text, Internal: true, Source: schema.SourceInbox, Kind: schema.KindAssigned, AssigneeID: operatorID})
}

// WakeSnoozed reopens, through the writer, the conversations whose snooze has ended by now,
// at most limit of them (the edge's tick calls it again for the rest). Each gets a status
// message "Snooze ended"; one the visitor reopened or an operator snoozed again meanwhile is
// left as it is.
func (s *Store) WakeSnoozed(ctx context.Context, now time.Time, limit int) (woken int, err error) {
	type due struct{ site, id int64 }
	list, err := readList(ctx, s, `SELECT site_id, id FROM conversations WHERE status = 'snoozed' AND snoozed_until <= ? ORDER BY snoozed_until LIMIT ?`,
		[]any{now.UnixMilli(), limit}, func(d *due) []any { return []any{&d.site, &d.id} })
	if err != nil {
		return 0, err
	}
	// Submitted together, committed together.
	done := make(chan MessageResult, len(list))
	submitted := 0
	for _, d := range list {
		if err = s.SubmitMessage(&MessageRequest{SiteID: d.site, ConversationID: d.id, Author: schema.AuthorSystem,
			Text: "Snooze ended", Internal: true, Source: schema.SourceInbox, Kind: schema.KindReopened, wakeDue: now.UnixMilli(),
			Done: func(r MessageResult) { done <- r }}); err != nil {
			break // the queue is full or the store closed: the next tick does the rest
		}
		submitted++
	}
	for range submitted {
		select {
		case r := <-done:
			if r.Err != nil && err == nil {
				err = r.Err
			}
			if r.Err == nil && !r.Unchanged {
				woken++
			}
		case <-ctx.Done():
			return woken, ctx.Err()
		}
	}
	return woken, err
}

// change submits a status or assignment message and waits for its commit.
func (s *Store) change(ctx context.Context, req *MessageRequest) (changed bool, err error) {
	done := make(chan MessageResult, 1)
	req.Done = func(r MessageResult) { done <- r }
	if err := s.SubmitMessage(req); err != nil {
		return false, err
	}
	select {
	case r := <-done:
		return !r.Unchanged && r.Err == nil, r.Err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
