package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"spookat/schema"
)

// A person's data, as a site holds it: the visitors that are them (by a visitor id, an
// email, or a verified user id), their conversations with every message written to them or
// by them (internal notes are the team's and stay out), ratings, the pages they were on, and
// their attachments. What an owner hands a person who asks for their data.

// PersonExportFormat names the document and its version (schema/PROTOCOL.md, "A person's
// data").
const (
	PersonExportFormat  = "spookat-person"
	PersonExportVersion = 1
)

// PersonSelector picks a person in a site: exactly one of its fields.
type PersonSelector struct {
	VisitorID int64  `json:"visitor_id,omitempty"`
	Email     string `json:"email,omitempty"`   // any case: every visitor that gave it
	UserID    string `json:"user_id,omitempty"` // the site's user id, verified or claimed
}

// Kind says how the person is named (email, user_id, visitor_id), never who: what the audit
// log keeps.
func (p PersonSelector) Kind() string {
	switch {
	case p.Email != "":
		return "email"
	case p.UserID != "":
		return "user_id"
	}
	return "visitor_id"
}

// personVisitors picks a site's visitors a selector names: ?1 the site, then the selector's
// visitor id, email and user id (args).
const personVisitors = `site_id = ?1 AND (id = ?2 OR (?3 != '' AND email = ?3 COLLATE NOCASE) OR (?4 != '' AND user_id = ?4))`

func (p PersonSelector) args(siteID int64) []any {
	return []any{siteID, p.VisitorID, strings.TrimSpace(p.Email), p.UserID}
}

// Check says what is wrong with a selector, in a sentence.
func (p PersonSelector) Check() error {
	n := 0
	if p.VisitorID != 0 {
		n++
	}
	if p.Email != "" {
		n++
	}
	if p.UserID != "" {
		n++
	}
	if n != 1 {
		return errors.New("name the person by exactly one of a visitor id, an email or a user id")
	}
	return nil
}

// PersonExport is the document of a person's data.
type PersonExport struct {
	Format        string               `json:"format"`
	Version       int                  `json:"version"`
	ExportedAt    time.Time            `json:"exported_at"`
	Site          PersonSite           `json:"site"`
	Selector      PersonSelector       `json:"selector"`
	Visitors      []PersonVisitor      `json:"visitors"`
	Conversations []PersonConversation `json:"conversations"`
}

// PersonSite names the site the data is from.
type PersonSite struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// PersonVisitor is one visitor record of the person.
type PersonVisitor struct {
	ID        int64           `json:"id"`
	Email     string          `json:"email,omitempty"`
	Name      string          `json:"name,omitempty"`
	UserID    string          `json:"user_id,omitempty"`
	Verified  bool            `json:"verified"`
	CreatedAt time.Time       `json:"created_at"`
	Context   json.RawMessage `json:"context,omitempty"` // the page, language, time zone, browser they last reported
}

// PersonConversation is a conversation of the person, its messages oldest first.
type PersonConversation struct {
	ID            int64           `json:"id"`
	VisitorID     int64           `json:"visitor_id"`
	Status        string          `json:"status"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	Rating        string          `json:"rating,omitempty"`
	RatingComment string          `json:"rating_comment,omitempty"`
	Context       json.RawMessage `json:"context,omitempty"` // the page it started on
	Messages      []PersonMessage `json:"messages"`
}

// PersonMessage is one message; File names its attachment and where the archive holds it.
type PersonMessage struct {
	ID        int64       `json:"id"`
	Author    string      `json:"author"` // visitor, operator or system
	Name      string      `json:"name,omitempty"`
	Text      string      `json:"text"`
	Kind      string      `json:"kind,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	File      *PersonFile `json:"file,omitempty"`
}

// PersonFile is an attachment: Path is its place in the archive (files/<key>-<name>).
type PersonFile struct {
	Key  string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
	Path string `json:"path,omitempty"` // "" when its bytes are gone (retention, a lost disk)
}

// ExportPerson gathers a person's data in a site (ErrNotFound when no visitor matches).
func (s *Store) ExportPerson(ctx context.Context, siteID int64, sel PersonSelector) (*PersonExport, error) {
	if err := sel.Check(); err != nil {
		return nil, err
	}
	out := &PersonExport{Format: PersonExportFormat, Version: PersonExportVersion, ExportedAt: time.Now().UTC(), Selector: sel,
		Visitors: []PersonVisitor{}, Conversations: []PersonConversation{}}
	ms := func(v int64) time.Time { return time.UnixMilli(v).UTC() }
	raw := func(s string) json.RawMessage {
		if s == "" || !json.Valid([]byte(s)) {
			return nil
		}
		return json.RawMessage(s)
	}
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT id, name FROM sites WHERE id = ?`)
		if err != nil {
			return err
		}
		if found, err := queryRow(st, []any{siteID}, &out.Site.ID, &out.Site.Name); err != nil || !found {
			if err == nil {
				err = ErrNotFound
			}
			return err
		}
		vs, err := q.Stmt(`SELECT id, email, name, coalesce(user_id, ''), verified, created_at, context FROM visitors
			WHERE ` + personVisitors + ` ORDER BY id`)
		if err != nil {
			return err
		}
		if err := eachRow(vs, sel.args(siteID), func() error {
			out.Visitors = append(out.Visitors, PersonVisitor{ID: vs.ColumnInt64(0), Email: vs.ColumnText(1), Name: vs.ColumnText(2), UserID: vs.ColumnText(3),
				Verified: vs.ColumnBool(4), CreatedAt: ms(vs.ColumnInt64(5)), Context: raw(vs.ColumnText(6))})
			return nil
		}); err != nil {
			return err
		}
		if len(out.Visitors) == 0 {
			return ErrNotFound
		}
		cs, err := q.Stmt(`SELECT c.id, c.status, c.created_at, c.updated_at, c.rating, c.rating_comment, coalesce(cc.context, '')
			FROM conversations c LEFT JOIN conversation_contexts cc ON cc.conversation_id = c.id WHERE c.visitor_id = ? ORDER BY c.id`)
		if err != nil {
			return err
		}
		msgs, err := q.Stmt(`SELECT m.id, m.author, m.name, m.text, m.kind, m.created_at, coalesce(f.key, ''), coalesce(f.name, ''), coalesce(f.type, ''), coalesce(f.size, 0)
			FROM messages m LEFT JOIN files f ON f.id = m.file_id WHERE m.conversation_id = ? AND m.internal = 0 ORDER BY m.id`)
		if err != nil {
			return err
		}
		for _, v := range out.Visitors {
			cs.Reset() // one statement, run once a visitor
			if err := eachRow(cs, []any{v.ID}, func() error {
				out.Conversations = append(out.Conversations, PersonConversation{ID: cs.ColumnInt64(0), VisitorID: v.ID, Status: cs.ColumnText(1),
					CreatedAt: ms(cs.ColumnInt64(2)), UpdatedAt: ms(cs.ColumnInt64(3)), Rating: cs.ColumnText(4), RatingComment: cs.ColumnText(5),
					Context: raw(cs.ColumnText(6)), Messages: []PersonMessage{}})
				return nil
			}); err != nil {
				return err
			}
		}
		for i := range out.Conversations {
			c := &out.Conversations[i]
			msgs.Reset()
			if err := eachRow(msgs, []any{c.ID}, func() error {
				m := PersonMessage{ID: msgs.ColumnInt64(0), Author: msgs.ColumnText(1), Name: msgs.ColumnText(2), Text: msgs.ColumnText(3),
					Kind: msgs.ColumnText(4), CreatedAt: ms(msgs.ColumnInt64(5))}
				if key := msgs.ColumnText(6); key != "" {
					name := msgs.ColumnText(7)
					m.File = &PersonFile{Key: key, Name: name, Type: msgs.ColumnText(8), Size: msgs.ColumnInt64(9), Path: "files/" + key + "-" + name}
				}
				if m.Author == string(schema.AuthorVisitor) {
					m.Name = "" // the visitor's own messages: no operator's name
				}
				c.Messages = append(c.Messages, m)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Files lists the attachments of an export, each once.
func (p *PersonExport) Files() []PersonFile {
	seen := map[string]bool{}
	var out []PersonFile
	for _, c := range p.Conversations {
		for _, m := range c.Messages {
			if f := m.File; f != nil && !seen[f.Key] {
				seen[f.Key] = true
				out = append(out, *f)
			}
		}
	}
	return out
}

// DropFile says an attachment is not in the archive (its bytes are gone): its path is cleared.
func (p *PersonExport) DropFile(key string) {
	for i := range p.Conversations {
		for j := range p.Conversations[i].Messages {
			if f := p.Conversations[i].Messages[j].File; f != nil && f.Key == key {
				f.Path = ""
			}
		}
	}
}
