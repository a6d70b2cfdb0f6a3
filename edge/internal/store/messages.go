package store

import (
	"errors"
	"sync"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema"
)

// ErrConversationNotFound is returned for a message to a conversation that does not exist.
var ErrConversationNotFound = errors.New("conversation not found")

// conversationChange applies the change a status or assignment message records. changed is
// false when there is none (the conversation has that status, or that assignee, already):
// the message is then not stored. Other messages change nothing here.
func (tx *Tx) conversationChange(m *MessageRequest, conversationID int64) (changed bool, err error) {
	switch st := m.Kind.Status(); {
	case m.wakeDue != 0:
		err = tx.exec(`UPDATE conversations SET status = 'open', snoozed_until = 0, updated_at = ?
			WHERE id = ? AND status = 'snoozed' AND snoozed_until <= ?`, tx.now, conversationID, m.wakeDue)
	case st != "":
		until := int64(0)
		if st == schema.ConvSnoozed {
			until = m.SnoozeUntil
		}
		err = tx.exec(`UPDATE conversations SET status = ?1, snoozed_until = ?2, updated_at = ?3
			WHERE id = ?4 AND (status != ?1 OR snoozed_until != ?2)`, st, until, tx.now, conversationID)
	case m.Kind == schema.KindAssigned:
		err = tx.exec(`UPDATE conversations SET assignee_id = ? WHERE id = ? AND assignee_id != ?`,
			m.AssigneeID, conversationID, m.AssigneeID)
	default:
		return true, nil
	}
	return err == nil && tx.c.Changes() == 1, err
}

// insertMessage stores one message inside the writer's transaction, creating the visitor and
// the conversation on the visitor's first message. A client id seen before in the
// conversation returns the stored message instead (idempotent resend).
func (tx *Tx) insertMessage(m *MessageRequest, res *MessageResult) (Committed, error) {
	*res = MessageResult{VisitorID: m.VisitorID, ConversationID: m.ConversationID}
	if res.ConversationID == 0 {
		if err := tx.visitorConversation(m, res); err != nil {
			return Committed{}, err
		}
	} else if m.Author != schema.AuthorVisitor && res.VisitorID == 0 {
		found, err := tx.QueryRow(`SELECT visitor_id FROM conversations WHERE id = ?`,
			[]any{res.ConversationID}, &res.VisitorID)
		if err != nil {
			return Committed{}, err
		}
		if !found {
			return Committed{}, ErrConversationNotFound
		}
	}
	if changed, err := tx.conversationChange(m, res.ConversationID); err != nil {
		return Committed{}, err
	} else if !changed {
		res.Duplicate, res.Unchanged = true, true
		return Committed{}, nil
	}
	if m.Context != nil && m.VisitorID != 0 { // a page the visitor's socket could not store before
		if err := tx.SetVisitorContext(m.VisitorID, m.Context); err != nil {
			return Committed{}, err
		}
	}
	source := m.Source
	if source == "" {
		source = schema.SourceInbox
		if m.Author == schema.AuthorVisitor {
			source = schema.SourceWidget
		}
	}
	id := tx.ids.nextMsg
	if err := tx.insertRow(m, id, res.ConversationID, source); err != nil {
		return Committed{}, err
	}
	if tx.c.Changes() == 1 {
		res.MessageID = id
		tx.ids.nextMsg++
	} else {
		res.Duplicate, res.First = true, false
		_, err := tx.QueryRow(`SELECT id, created_at FROM messages WHERE conversation_id = ? AND source = ? AND client_id = ?`,
			[]any{res.ConversationID, string(source), m.ClientID}, &res.MessageID, &res.CreatedAt)
		return Committed{}, err
	}
	res.CreatedAt = tx.now
	var file *schema.File
	if m.File != nil {
		file = m.File.Wire()
	}
	return Committed{
		MessageID:      res.MessageID,
		ConversationID: res.ConversationID,
		SiteID:         m.SiteID,
		VisitorID:      res.VisitorID,
		Author:         m.Author,
		Name:           m.Name,
		Text:           m.Text,
		Source:         source,
		ClientID:       m.ClientID,
		Internal:       m.Internal,
		CreatedAt:      tx.now,
		First:          res.First,
		File:           file,
		Kind:           m.Kind,
		SnoozeUntil:    m.SnoozeUntil,
		AssigneeID:     m.AssigneeID,
		Origin:         m.Origin,
	}, nil
}

// insertRow is the message's INSERT, bound by type: the visitor's path binds eleven values a
// message, and tx.exec's ...any would box most of them (allocations the collector pays for).
// No RETURNING: SQLite would stage the returned row in a temporary table first; the change
// count and last rowid say the same for less.
func (tx *Tx) insertRow(m *MessageRequest, id, conversationID int64, source schema.Source) error {
	sql, literal := insertSQL(m.Author, source, m.Kind)
	st, err := tx.stmts.get(sql)
	if err != nil {
		return err
	}
	defer st.ClearBindings()
	err = errors.Join(
		st.BindInt64(1, id), st.BindInt64(2, conversationID), st.BindText(4, m.Name), st.BindText(5, m.Text),
		bindOptionalText(st, 7, m.ClientID), st.BindBool(8, m.Internal), st.BindInt64(9, tx.now), bindFileID(st, 10, m.File))
	if err == nil && !literal {
		err = errors.Join(st.BindText(3, string(m.Author)), st.BindText(6, string(source)), st.BindText(11, string(m.Kind)))
	}
	if err != nil {
		return err
	}
	return st.Exec()
}

// The message INSERT. Its author, source and kind come from a few words (schema's), so the
// statement the writer runs has them written in as literals, one statement for each of the
// few combinations that occur: every text bound is a copy into SQLite's memory, and these
// three were half of them. A word that is not plainly [a-z_] (never, today) is bound instead.
func insertMessageSQL(author, source, kind string) string {
	return `INSERT INTO messages (id, conversation_id, author, name, text, source, client_id, internal, created_at, file_id, kind)
		VALUES (?1, ?2, ` + author + `, ?4, ?5, ` + source + `, ?7, ?8, ?9, ?10, ` + kind + `)
		ON CONFLICT (conversation_id, source, client_id) DO NOTHING`
}

// insertBound is the INSERT with every word bound.
var insertBound = insertMessageSQL("?3", "?6", "?11")

type insertWords struct {
	author schema.Author
	source schema.Source
	kind   schema.MessageKind
}

var insertSQLs sync.Map // insertWords → string

// insertSQL is the INSERT for a message of these words, and whether they are literals in it.
func insertSQL(author schema.Author, source schema.Source, kind schema.MessageKind) (string, bool) {
	k := insertWords{author, source, kind}
	if sql, ok := insertSQLs.Load(k); ok {
		return sql.(string), true
	}
	if !plainWord(string(author)) || !plainWord(string(source)) || !plainWord(string(kind)) {
		return insertBound, false
	}
	sql := insertMessageSQL(`'`+string(author)+`'`, `'`+string(source)+`'`, `'`+string(kind)+`'`)
	insertSQLs.Store(k, sql)
	return sql, true
}

// plainWord reports whether s is lower-case letters and underscores only (and so a safe
// SQL literal between single quotes).
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

func bindOptionalText(st *sqlite3.Stmt, i int, s string) error {
	if s == "" {
		return st.BindNull(i)
	}
	return st.BindText(i, s)
}

// bindFileID binds an attachment's id, or NULL without one.
func bindFileID(st *sqlite3.Stmt, i int, f *File) error {
	if f == nil {
		return st.BindNull(i)
	}
	return st.BindInt64(i, f.ID)
}

// visitorConversation finds or creates the visitor (by token hash) and its conversation.
// One conversation per visitor: a closed one is reopened by the visitor's next message.
func (tx *Tx) visitorConversation(m *MessageRequest, res *MessageResult) error {
	ctx := contextJSON(m.Context)
	if res.VisitorID == 0 {
		found, err := tx.QueryRow(`INSERT INTO visitors (site_id, token_hash, created_at, context) VALUES (?, ?, ?, ?)
			ON CONFLICT (token_hash) DO NOTHING RETURNING id`,
			[]any{m.SiteID, m.TokenHash, tx.now, ctx}, &res.VisitorID)
		if err != nil {
			return err
		}
		if found && m.Claim != nil {
			if err := tx.exec(`UPDATE visitors SET user_id = ?, name = ?, email = ? WHERE id = ?`,
				m.Claim.UserID, m.Claim.Name, m.Claim.Email, res.VisitorID); err != nil {
				return err
			}
		}
		if !found {
			if _, err := tx.QueryRow(`SELECT id FROM visitors WHERE token_hash = ?`,
				[]any{m.TokenHash}, &res.VisitorID); err != nil {
				return err
			}
		}
	}
	found, err := tx.QueryRow(`SELECT id FROM conversations WHERE visitor_id = ?`,
		[]any{res.VisitorID}, &res.ConversationID)
	if err != nil || found {
		return err
	}
	id := tx.ids.nextConv
	if err := tx.exec(`INSERT INTO conversations (id, site_id, visitor_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		id, m.SiteID, res.VisitorID, tx.now, tx.now); err != nil {
		return err
	}
	if ctx != "" {
		if err := tx.exec(`INSERT INTO conversation_contexts (conversation_id, context) VALUES (?, ?)`, id, ctx); err != nil {
			return err
		}
	}
	tx.ids.nextConv++
	res.ConversationID, res.First = id, true
	return nil
}
