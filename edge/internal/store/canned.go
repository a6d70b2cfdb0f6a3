package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"spookat/schema"
)

// Canned replies: a site's shared answers, written in the inbox and inserted into the
// composer. Their text is a template (placeholders filled in by the inbox), not a message.

// Limits of canned replies.
const (
	CannedTitleMax = 80   // runes
	CannedPerSite  = 1000 // more is a list nobody can pick from with a few letters
)

// CannedReply is one of a site's canned replies.
type CannedReply struct {
	ID        int64  `json:"id"`
	SiteID    int64  `json:"site_id"`
	Title     string `json:"title"`
	Text      string `json:"text"`
	UpdatedBy string `json:"updated_by"` // the operator's name or email; "" for the CLI or a removed operator
	UpdatedAt int64  `json:"updated_at"` // Unix ms
}

// ErrCannedInvalid wraps what is wrong with a canned reply, in a sentence for the operator.
var ErrCannedInvalid = errors.New("invalid canned reply")

type cannedError struct{ msg string }

func (e *cannedError) Error() string { return e.msg }
func (e *cannedError) Unwrap() error { return ErrCannedInvalid }

// checkCanned trims a canned reply's title and text and checks them.
func checkCanned(title, text string) (string, string, error) {
	title, text = strings.TrimSpace(title), strings.TrimSpace(text)
	switch {
	case title == "":
		return "", "", &cannedError{"Give the canned reply a title: it is what you type after / to find it."}
	case utf8.RuneCountInString(title) > CannedTitleMax:
		return "", "", &cannedError{fmt.Sprintf("The title is too long: use at most %d characters.", CannedTitleMax)}
	case strings.ContainsFunc(title, unicode.IsControl):
		return "", "", &cannedError{"The title must be one line."}
	case text == "":
		return "", "", &cannedError{"Write the reply's text."}
	case utf8.RuneCountInString(text) > schema.MaxTextRunes:
		return "", "", &cannedError{fmt.Sprintf("The text is too long: a message holds at most %d characters.", schema.MaxTextRunes)}
	case !utf8.ValidString(title) || !utf8.ValidString(text):
		return "", "", &cannedError{"The title and text must be UTF-8."}
	}
	return title, text, nil
}

const cannedColumns = `c.id, c.site_id, c.title, c.text, coalesce(nullif(o.name, ''), o.email, ''), c.updated_at
	FROM canned_replies c LEFT JOIN operators o ON o.id = c.updated_by`

func (c *CannedReply) dest() []any {
	return []any{&c.ID, &c.SiteID, &c.Title, &c.Text, &c.UpdatedBy, &c.UpdatedAt}
}

// CannedReplies lists a site's canned replies by title.
func (s *Store) CannedReplies(ctx context.Context, siteID int64) ([]CannedReply, error) {
	return readList(ctx, s, `SELECT `+cannedColumns+` WHERE c.site_id = ? ORDER BY c.title COLLATE NOCASE`,
		[]any{siteID}, (*CannedReply).dest)
}

// SaveCanned adds a canned reply to a site (c.ID 0) or replaces one of its own (ErrNotFound
// for another site's id), written by operatorID (0: the CLI); c is filled in as stored. A
// title the site has already, in any case, is refused.
func (tx *Tx) SaveCanned(c *CannedReply, operatorID int64) error {
	title, text, err := checkCanned(c.Title, c.Text)
	if err != nil {
		return err
	}
	var taken string
	if found, err := tx.QueryRow(`SELECT title FROM canned_replies WHERE site_id = ? AND title = ? COLLATE NOCASE AND id != ?`,
		[]any{c.SiteID, title, c.ID}, &taken); err != nil || found {
		if err == nil {
			err = &cannedError{fmt.Sprintf("This site has a canned reply titled “%s” already: pick another title, or edit that one.", taken)}
		}
		return err
	}
	if c.ID == 0 {
		var n int
		if _, err := tx.QueryRow(`SELECT count(*) FROM canned_replies WHERE site_id = ?`, []any{c.SiteID}, &n); err != nil {
			return err
		}
		if n >= CannedPerSite {
			return &cannedError{fmt.Sprintf("This site has %d canned replies, the most it may keep: remove some first.", CannedPerSite)}
		}
		if err := tx.exec(`INSERT INTO canned_replies (site_id, title, text, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)`,
			c.SiteID, title, text, operatorID, tx.now); err != nil {
			return err
		}
		c.ID = tx.LastInsertRowID()
	} else {
		if err := tx.exec(`UPDATE canned_replies SET title = ?, text = ?, updated_by = ?, updated_at = ? WHERE id = ? AND site_id = ?`,
			title, text, operatorID, tx.now, c.ID, c.SiteID); err != nil {
			return err
		}
		if tx.c.Changes() == 0 {
			return ErrNotFound
		}
	}
	found, err := tx.QueryRow(`SELECT `+cannedColumns+` WHERE c.id = ?`, []any{c.ID}, c.dest()...)
	if err == nil && !found {
		err = ErrNotFound
	}
	return err
}

// DeleteCanned removes one of a site's canned replies (ErrNotFound for another site's id).
func (tx *Tx) DeleteCanned(siteID, id int64) error {
	if err := tx.exec(`DELETE FROM canned_replies WHERE id = ? AND site_id = ?`, id, siteID); err != nil {
		return err
	}
	if tx.c.Changes() == 0 {
		return ErrNotFound
	}
	return nil
}
