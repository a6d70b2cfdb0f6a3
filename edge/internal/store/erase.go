package store

import (
	"context"
	"fmt"
)

// Erasing a person: what ExportPerson would give is deleted in one commit of the writer,
// with SQLite's secure_delete on (the freed pages and cells are overwritten with zeros); the
// search index, in its own file, then forgets their words with FTS5's secure-delete (the
// entries go at once, not as tombstones over old segments) and empties its WAL, and the rows
// that told it which (search_forget) are deleted, zeroed (searchindex.go).
// The writer runs with secure_delete=FAST otherwise, so the earlier versions of a row (a
// visitor's previous page, name or email) were zeroed when they were replaced instead of
// lingering in their page's free space. The caller then removes the attachments' files and
// empties the WAL (TruncateWAL): only then are the deleted bytes in neither file.

// Erased is what an erasure deleted, and where the person's messages had gone before it.
type Erased struct {
	Visitors      int `json:"visitors"`
	Conversations int `json:"conversations"`
	// VisitorIDs and ConversationIDs are the erased ids, for the site's webhook receiver.
	VisitorIDs      []int64  `json:"visitor_ids"`
	ConversationIDs []int64  `json:"conversation_ids"`
	Messages        int      `json:"messages"`
	FileKeys        []string `json:"-"` // the attachments to remove from the disk
	Files           int      `json:"files"`
	// Delivered are the targets that had the person's messages and cannot unsend them: Slack
	// threads (ts), Discord and webhook message ids, emails (message ids).
	Delivered []ErasedDelivery `json:"delivered"`
}

// ErasedDelivery is one place outside the edge that got a message of the person's.
type ErasedDelivery struct {
	Target       string `json:"target"`
	Conversation int64  `json:"conversation_id"`
	ExternalID   string `json:"external_id,omitempty"`
	Thread       string `json:"thread,omitempty"` // the Slack thread of the conversation
}

// ErasePerson deletes a person's visitors, conversations, messages, delivery records, read
// markers, search index entries and attachment rows in a site (ErrNotFound when none match).
func (s *Store) ErasePerson(ctx context.Context, siteID int64, sel PersonSelector, who *AuditEntry) (*Erased, error) {
	if err := sel.Check(); err != nil {
		return nil, err
	}
	e := &Erased{Delivered: []ErasedDelivery{}}
	var forgetTo int64 // the search_forget rows of the messages erased (searchindex.go)
	err := s.WriteDurable(ctx, func(tx *Tx) error {
		var visitors []int64
		st, err := tx.Stmt(`SELECT id FROM visitors WHERE ` + personVisitors)
		if err != nil {
			return err
		}
		err = eachRow(st, sel.args(siteID), func() error {
			visitors = append(visitors, st.ColumnInt64(0))
			return nil
		})
		st.Reset()
		if err != nil {
			return err
		}
		if len(visitors) == 0 {
			return ErrNotFound
		}
		if err := tx.exec(`PRAGMA secure_delete = ON`); err != nil {
			return err
		}
		defer func() { _ = tx.exec(`PRAGMA secure_delete = FAST`) }() // the writer's own setting (store.go)
		for _, v := range visitors {
			var convs []int64
			cs, err := tx.Stmt(`SELECT id FROM conversations WHERE visitor_id = ?`)
			if err != nil {
				return err
			}
			err = eachRow(cs, []any{v}, func() error { convs = append(convs, cs.ColumnInt64(0)); return nil })
			cs.Reset()
			if err != nil {
				return err
			}
			for _, c := range convs {
				ds, err := tx.Stmt(`SELECT d.target, d.external_id, c.slack_thread FROM deliveries d JOIN messages m ON m.id = d.message_id
					JOIN conversations c ON c.id = m.conversation_id WHERE m.conversation_id = ? AND d.status = 'delivered'`)
				if err != nil {
					return err
				}
				err = eachRow(ds, []any{c}, func() error {
					d := ErasedDelivery{Target: ds.ColumnText(0), Conversation: c, ExternalID: ds.ColumnText(1)}
					if d.Target == "slack" {
						d.Thread = ds.ColumnText(2)
					}
					e.Delivered = append(e.Delivered, d)
					return nil
				})
				ds.Reset()
				if err != nil {
					return err
				}
				n, keys, err := tx.deleteMessages(c, 1<<30)
				if err != nil {
					return err
				}
				e.Messages += n
				e.FileKeys = append(e.FileKeys, keys...)
				if err := tx.deleteConversation(c); err != nil {
					return err
				}
				e.Conversations++
				e.ConversationIDs = append(e.ConversationIDs, c)
			}
			// Uploads of theirs no message carried yet.
			fs, err := tx.Stmt(`SELECT f.id, f.key FROM files f JOIN visitors v ON v.token_hash = f.token_hash WHERE v.id = ? AND f.site_id = ?`)
			if err != nil {
				return err
			}
			var unsent []struct {
				id  int64
				key string
			}
			err = eachRow(fs, []any{v, siteID}, func() error {
				unsent = append(unsent, struct {
					id  int64
					key string
				}{fs.ColumnInt64(0), fs.ColumnText(1)})
				return nil
			})
			fs.Reset()
			if err != nil {
				return err
			}
			for _, f := range unsent {
				if err := tx.exec(`DELETE FROM files WHERE id = ?`, f.id); err != nil {
					return err
				}
				e.FileKeys = append(e.FileKeys, f.key)
			}
			if err := tx.exec(`DELETE FROM visitors WHERE id = ?`, v); err != nil {
				return err
			}
			e.Visitors++
			e.VisitorIDs = append(e.VisitorIDs, v)
		}
		e.Files = len(e.FileKeys)
		if _, err := tx.QueryRow(`SELECT coalesce(max(seq), 0) FROM search_forget`, nil, &forgetTo); err != nil {
			return err
		}
		if who == nil {
			return nil
		}
		// How the person was named and how much went: never who they were.
		who.SiteID, who.Action = siteID, AuditPersonErased
		who.Detail = map[string]any{"by": sel.Kind(), "visitors": e.Visitors, "conversations": e.Conversations, "messages": e.Messages}
		return tx.Audit(*who)
	})
	if err != nil {
		return nil, err
	}
	// The search index forgets their words in its own file; then the rows that told it
	// which go too, zeroed (they held the words).
	if err := s.forgetApplied(ctx, forgetTo); err != nil {
		return nil, fmt.Errorf("erased, but the search index has not yet forgotten the words (it will within seconds of running again): %w", err)
	}
	err = s.WriteDurable(ctx, func(tx *Tx) error { return tx.deleteForgotten(forgetTo) })
	if err != nil {
		return nil, err
	}
	return e, nil
}
