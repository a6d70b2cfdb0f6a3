package store

import (
	"context"

	"spookat/schema"
)

// VisitorState is what the widget's hello needs to know about a returning visitor.
type VisitorState struct {
	VisitorID      int64
	ConversationID int64 // 0: no conversation yet
	LastMessageID  int64
	ReadMessageID  int64             // the visitor's read marker
	SeenMessageID  int64             // the highest operator read marker
	Status         schema.ConvStatus // the conversation's, "" without one
	Rating         string
	HasEmail       bool // the visitor left an email (or the site's identify gave one)
}

// visitorStateFrom selects a VisitorState (dest, in this order) of visitors v; a WHERE follows.
const visitorStateFrom = `SELECT v.id, coalesce(c.id, 0), coalesce(c.last_message_id, 0), coalesce(c.visitor_read_id, 0),
		coalesce((SELECT max(r.last_read_id) FROM conversation_reads r WHERE r.conversation_id = c.id), 0),
		coalesce(c.status, ''), coalesce(c.rating, ''), v.email != ''
	FROM visitors v LEFT JOIN conversations c ON c.visitor_id = v.id `

func (v *VisitorState) dest() []any {
	return []any{&v.VisitorID, &v.ConversationID, &v.LastMessageID, &v.ReadMessageID, &v.SeenMessageID, &v.Status, &v.Rating, &v.HasEmail}
}

// VisitorByToken finds a site's visitor by token hash.
func (s *Store) VisitorByToken(ctx context.Context, siteID int64, tokenHash []byte) (v VisitorState, found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(visitorStateFrom + `WHERE v.token_hash = ? AND v.site_id = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{tokenHash, siteID}, v.dest()...)
		return err
	})
	return v, found, err
}

// Message is a stored message as readers see it.
type Message struct {
	ID        int64
	Author    schema.Author
	Name      string
	Text      string
	ClientID  string
	Internal  bool
	CreatedAt int64        // Unix ms
	File      *schema.File // the attachment, nil for none
	Kind      schema.MessageKind
	Reopened  bool // a visitor's message that reopened the closed conversation
}

// fileColumns are a message's attachment as scan reads it into a **schema.File (last).
const fileColumns = `f.key, f.name, f.type, f.size`

// MessagesAfter calls fn for the messages of a conversation with id > after, in order, at
// most limit of them. Internal notes are left out unless withInternal.
func (s *Store) MessagesAfter(ctx context.Context, conversationID, after int64, limit int, withInternal bool, fn func(*Message) error) error {
	return s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT m.id, m.author, m.name, m.text, coalesce(m.client_id, ''), m.internal, m.created_at, m.kind, m.reopened, ` + fileColumns + `
			FROM messages m LEFT JOIN files f ON f.id = m.file_id
			WHERE m.conversation_id = ? AND m.id > ? AND (m.internal = 0 OR ?)
			ORDER BY m.id LIMIT ?`)
		if err != nil {
			return err
		}
		var m Message
		return eachRow(st, []any{conversationID, after, withInternal, limit}, func() error {
			if err := scan(st, &m.ID, &m.Author, &m.Name, &m.Text, &m.ClientID, &m.Internal, &m.CreatedAt, &m.Kind, &m.Reopened, &m.File); err != nil {
				return err
			}
			return fn(&m)
		})
	})
}

// Unpublished hands fn, in pages and in id order, every message above the outbox watermark
// `after`, as the writer had handed them over at commit. It returns how many there were.
func (s *Store) Unpublished(ctx context.Context, after int64, fn func([]Committed)) (int, error) {
	const page = 1000
	total := 0
	for {
		batch, err := readList(ctx, s, `SELECT m.id, m.conversation_id, c.site_id, c.visitor_id, m.author, m.name, m.text,
				m.source, coalesce(m.client_id, ''), m.internal, m.created_at, c.first_message_id = m.id, m.kind, m.reopened, `+fileColumns+`
				FROM messages m JOIN conversations c ON c.id = m.conversation_id LEFT JOIN files f ON f.id = m.file_id
				WHERE m.id > ? ORDER BY m.id LIMIT ?`,
			[]any{after, page}, func(c *Committed) []any {
				return []any{&c.MessageID, &c.ConversationID, &c.SiteID, &c.VisitorID, &c.Author, &c.Name,
					&c.Text, &c.Source, &c.ClientID, &c.Internal, &c.CreatedAt, &c.First, &c.Kind, &c.Reopened, &c.File}
			})
		if err != nil {
			return total, err
		}
		if len(batch) == 0 {
			return total, nil
		}
		if err := s.Read(ctx, func(q Querier) error {
			done, err := q.Stmt(`SELECT target FROM deliveries WHERE message_id = ? AND status IN ('delivered', 'dead')`)
			if err != nil {
				return err
			}
			for i := range batch {
				c := &batch[i]
				c.Replayed = true
				if err := addJobFacts(q.Stmt, c); err != nil {
					return err
				}
				if err := eachRow(done, []any{c.MessageID}, func() error {
					c.Done = append(c.Done, done.ColumnText(0))
					return nil
				}); err != nil {
					return err
				}
				done.Reset()
			}
			return nil
		}); err != nil {
			return total, err
		}
		fn(batch)
		total += len(batch)
		after = batch[len(batch)-1].MessageID
	}
}

// TranscriptTarget is where a transcript of a conversation goes (the address its visitor
// left, "" for none) and whether the conversation is closed.
func (s *Store) TranscriptTarget(ctx context.Context, conversationID int64) (email string, closed bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT v.email, c.status = 'closed' FROM conversations c JOIN visitors v ON v.id = c.visitor_id WHERE c.id = ?`)
		if err != nil {
			return err
		}
		_, err = queryRow(st, []any{conversationID}, &email, &closed)
		return err
	})
	return email, closed, err
}

// Transcript reads a conversation as its visitor saw it, up to message through (see
// transcript).
func (s *Store) Transcript(ctx context.Context, conversationID, through int64) (t *schema.Transcript, err error) {
	err = s.Read(ctx, func(q Querier) error {
		t, err = transcript(q.Stmt, conversationID, through)
		return err
	})
	return t, err
}
