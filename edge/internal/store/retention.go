package store

import (
	"context"
	"time"
)

// Retention: a site with retention_days > 0 keeps a conversation until its last activity
// (updated_at: a message, a status change) is that many days old; then the conversation goes
// with its messages, their delivery records and attachments, its read markers and its visitor
// (a visitor has one conversation). Whole conversations, not old messages of a live one: an
// operator never finds a conversation with its beginning cut off.

// SetRetention sets the retention of the site with key, and returns the site.
func (tx *Tx) SetRetention(key string, days int) (*Site, error) {
	var id int64
	found, err := tx.QueryRow(`UPDATE sites SET retention_days = ? WHERE key = ? RETURNING id`, []any{days, key}, &id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return tx.SiteByID(id)
}

// Purge is what one PurgeExpired call deleted.
type Purge struct {
	Conversations int
	Messages      int
	FileKeys      []string // the attachments' keys: the caller removes the files from disk
	// More says the pass is not over: the next call goes on after Next.
	More bool
	Next int64
}

// expiredAt is the condition on a conversation c of site s that retention has passed at ?2
// (Unix ms): the search for expired conversations and the check in the commit share it.
const expiredAt = `s.retention_days > 0 AND c.updated_at < ?2 - s.retention_days * 86400000`

// purgeConvs is how many expired conversations one call looks for.
const purgeConvs = 32

// PurgeExpired deletes, in one commit of the writer, at most limit messages of conversations
// whose site's retention has passed, scanning conversations with an id above after (0 to
// begin a pass). The search runs on a reader, so the writer's commit holds only the deletes;
// each conversation is checked again in that commit (a visitor who came back keeps it). While
// it finds expired conversations the pass has More; the next call goes on after Next.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, after int64, limit int) (p Purge, err error) {
	type expired struct{ id int64 }
	list, err := readList(ctx, s, `SELECT c.id FROM conversations c JOIN sites s ON s.id = c.site_id
			WHERE c.id > ?1 AND `+expiredAt+` ORDER BY c.id LIMIT ?3`,
		[]any{after, now.UnixMilli(), purgeConvs}, func(e *expired) []any { return []any{&e.id} })
	if err != nil || len(list) == 0 {
		return p, err
	}
	err = s.Write(ctx, func(tx *Tx) error {
		p = Purge{Next: after, More: true}
		left := limit
		for _, c := range list {
			if left <= 0 {
				break
			}
			var visitor int64
			still, err := tx.QueryRow(`SELECT c.visitor_id FROM conversations c JOIN sites s ON s.id = c.site_id
				WHERE c.id = ?1 AND `+expiredAt, []any{c.id, now.UnixMilli()}, &visitor)
			if err != nil {
				return err
			}
			if !still {
				p.Next = c.id
				continue
			}
			n, keys, err := tx.deleteMessages(c.id, left)
			if err != nil {
				return err
			}
			p.Messages += n
			p.FileKeys = append(p.FileKeys, keys...)
			left -= n
			if left <= 0 {
				// Maybe more of it: the next call starts at this conversation again.
				p.Next = c.id - 1
				break
			}
			if err := tx.deleteConversation(c.id); err != nil {
				return err
			}
			if err := tx.exec(`DELETE FROM visitors WHERE id = ? AND NOT EXISTS (SELECT 1 FROM conversations WHERE visitor_id = ?)`, visitor, visitor); err != nil {
				return err
			}
			p.Conversations++
			p.Next = c.id
		}
		return nil
	})
	if err != nil {
		return Purge{}, err
	}
	return p, nil
}

// deleteConversation deletes a conversation's row, context and read markers, once
// deleteMessages has taken its messages.
func (tx *Tx) deleteConversation(id int64) error {
	for _, q := range []string{`DELETE FROM conversation_reads WHERE conversation_id = ?`,
		`DELETE FROM conversation_contexts WHERE conversation_id = ?`, `DELETE FROM conversations WHERE id = ?`} {
		if err := tx.exec(q, id); err != nil {
			return err
		}
	}
	return nil
}

// deleteMessages deletes up to limit messages of a conversation with their delivery records
// and attachment rows, and returns how many and the attachments' keys.
func (tx *Tx) deleteMessages(conversationID int64, limit int) (n int, keys []string, err error) {
	st, err := tx.Stmt(`SELECT m.id, coalesce(f.id, 0), coalesce(f.key, ''), m.kind = '' AND m.text != '', c.site_id, m.text
		FROM messages m JOIN conversations c ON c.id = m.conversation_id LEFT JOIN files f ON f.id = m.file_id
		WHERE m.conversation_id = ? LIMIT ?`)
	if err != nil {
		return 0, nil, err
	}
	type row struct {
		msg, file int64
		key       string
		indexed   bool // in the search index (the rows of message_search)
		site      int64
		text      string
	}
	var rows []row
	err = eachRow(st, []any{conversationID, limit}, func() error {
		rows = append(rows, row{st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnText(2), st.ColumnBool(3), st.ColumnInt64(4), st.ColumnText(5)})
		return nil
	})
	st.Reset()
	if err != nil {
		return 0, nil, err
	}
	for _, r := range rows {
		if r.indexed {
			// The search index forgets it in its own file (searchindex.go).
			if err := tx.exec(`INSERT INTO search_forget (message, site, text) VALUES (?, ?, ?)`, r.msg, r.site, r.text); err != nil {
				return 0, nil, err
			}
		}
		if err := tx.exec(`DELETE FROM deliveries WHERE message_id = ?`, r.msg); err != nil {
			return 0, nil, err
		}
		if err := tx.exec(`DELETE FROM messages WHERE id = ?`, r.msg); err != nil {
			return 0, nil, err
		}
		if r.file != 0 {
			if err := tx.exec(`DELETE FROM files WHERE id = ?`, r.file); err != nil {
				return 0, nil, err
			}
			keys = append(keys, r.key)
		}
	}
	return len(rows), keys, nil
}
