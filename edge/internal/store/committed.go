package store

import (
	"slices"
	"time"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema"
)

// CommitListener hears each commit's messages, in id order, on the writer's goroutine right
// after the commit (before Flush returns): the visitors' and operators' hubs, presence, the
// results' origins and the job publisher are the edge's. It must not block, and must not keep
// msgs past the call (the writer reuses the slice for the next commit): it copies what it keeps.
type CommitListener interface {
	Committed(msgs []Committed)
}

// CommitFunc is a function as a CommitListener.
type CommitFunc func(msgs []Committed)

// Committed calls f.
func (f CommitFunc) Committed(msgs []Committed) { f(msgs) }

// Committed is a message as stored by a commit, handed to the Options.Listeners; Unpublished
// reads the same record back for a replay. Besides the row it carries what the message's jobs
// need, read in the transaction that stored it, so that building them reads nothing.
type Committed struct {
	MessageID      int64
	ConversationID int64
	SiteID         int64
	VisitorID      int64
	Author         schema.Author
	Name           string
	Text           string
	Source         schema.Source
	ClientID       string
	Internal       bool
	CreatedAt      int64 // Unix ms
	First          bool
	File           *schema.File // the attachment, nil for none
	Kind           schema.MessageKind
	Reopened       bool  // a visitor's message that reopened the conversation
	SnoozeUntil    int64 // KindSnoozed: when it reopens by itself (Unix ms)
	AssigneeID     int64 // KindAssigned: the operator it is assigned to, 0 for nobody
	Origin         any

	// VisitorEmail is the address the conversation's visitor left ("": none), on an
	// operator's message (a reply to a visitor who is gone is emailed) and on a transcript
	// request.
	VisitorEmail string
	// Started is the page the conversation started on, on its first visitor message.
	Started *schema.VisitorContext
	// Transcript is the conversation as its visitor saw it up to this message, on a
	// transcript request.
	Transcript *schema.Transcript
	// Done are the targets whose delivery of this message is recorded as ended (delivered,
	// or dead): a replay after a crash publishes no job for them again. Only a replay reads
	// them; a fresh commit has none.
	Done []string
	// Replayed marks a record Unpublished read back: its jobs may have gone out before the
	// crash (a delivery whose record the crash or a power cut took), so they travel marked
	// as possible repeats.
	Replayed bool
}

// stmtFunc hands out a cached prepared statement: the writer's (Tx.Stmt) or a reader's
// (Querier.Stmt).
type stmtFunc func(sql string) (*sqlite3.Stmt, error)

// addJobFacts reads what c's jobs need beyond its row (see Committed), on the connection that
// committed it or, for a replay, a reader. (It reads into locals: a field of c handed to the
// scan would move every commit record to the heap, a visitor's plain message included.)
func addJobFacts(stmt stmtFunc, c *Committed) error {
	if c.First && c.Author == schema.AuthorVisitor {
		var j string
		if err := queryOne(stmt, `SELECT context FROM conversation_contexts WHERE conversation_id = ?`, []any{c.ConversationID}, &j); err != nil {
			return err
		}
		c.Started = contextFrom(j)
	}
	if c.Author == schema.AuthorOperator || c.Kind == schema.KindTranscript {
		var email string
		if err := queryOne(stmt, `SELECT email FROM visitors WHERE id = ?`, []any{c.VisitorID}, &email); err != nil {
			return err
		}
		c.VisitorEmail = email
	}
	if c.Kind == schema.KindTranscript {
		t, err := transcript(stmt, c.ConversationID, c.MessageID)
		if err != nil {
			return err
		}
		c.Transcript = t
	}
	return nil
}

func queryOne(stmt stmtFunc, sql string, args []any, dest ...any) error {
	st, err := stmt(sql)
	if err != nil {
		return err
	}
	_, err = queryRow(st, args, dest...)
	return err
}

// transcript reads a conversation as its visitor saw it, up to message through (internal
// notes and transcript requests left out): the last schema.MaxTranscriptLines messages
// within schema.MaxTranscriptBytes of text.
func transcript(stmt stmtFunc, conversationID, through int64) (*schema.Transcript, error) {
	st, err := stmt(`SELECT m.author, m.name, m.text, coalesce(f.name, ''), m.created_at
		FROM messages m LEFT JOIN files f ON f.id = m.file_id
		WHERE m.conversation_id = ? AND m.id <= ? AND m.internal = 0 AND m.kind != 'transcript'
		ORDER BY m.id DESC`)
	if err != nil {
		return nil, err
	}
	defer func() { st.Reset(); st.ClearBindings() }()
	t := &schema.Transcript{}
	size := 0
	err = eachRow(st, []any{conversationID, through}, func() error {
		var l schema.TranscriptLine
		var at int64
		if err := scan(st, &l.Author, &l.Name, &l.Text, &l.File, &at); err != nil {
			return err
		}
		if size += len(l.Text); len(t.Lines) >= schema.MaxTranscriptLines || size > schema.MaxTranscriptBytes {
			t.Earlier++
			return nil
		}
		l.At = time.UnixMilli(at).UTC()
		t.Lines = append(t.Lines, l)
		return nil
	})
	slices.Reverse(t.Lines)
	return t, err
}
