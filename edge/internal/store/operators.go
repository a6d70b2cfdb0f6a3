package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Operator management: passwords, removal, memberships. Each change that takes a right away
// (a new password, a removal) deletes the sessions and API tokens it ends in the same
// transaction, so no request authenticated after the commit can still use them; closing
// the live websockets is the caller's part (inbox.Hub).

// ErrOperatorExists is returned by AddOperator for an email already taken.
var ErrOperatorExists = errors.New("an operator with this email exists")

// HashPassword checks a password's length and returns its bcrypt hash. Call it outside a
// write transaction: bcrypt is slow on purpose and the writer is shared.
func HashPassword(password string) (string, error) {
	if err := PasswordRule(password); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	return string(h), err
}

// PasswordRule says what is wrong with a new password's length (nil: nothing).
func PasswordRule(password string) error {
	if len(password) < 8 {
		return errors.New("the password must have at least 8 characters")
	}
	if len(password) > 72 { // bcrypt reads no further
		return errors.New("the password must have at most 72 bytes")
	}
	return nil
}

// OperatorByEmail finds an operator (emails compare case-insensitively).
func (tx *Tx) OperatorByEmail(email string) (op Operator, found bool, err error) {
	found, err = tx.QueryRow(`SELECT id, email, name FROM operators WHERE email = ?`, []any{email},
		&op.ID, &op.Email, &op.Name)
	return op, found, err
}

// SetOperatorPassword stores a new password hash (from HashPassword) and revokes every
// session and API token of the operator, except the session keepSession when it is not nil
// (an operator changing their own password stays logged in where they did it).
func (tx *Tx) SetOperatorPassword(operatorID int64, hash string, keepSession []byte) error {
	if err := tx.exec(`UPDATE operators SET password_hash = ? WHERE id = ?`, hash, operatorID); err != nil {
		return err
	}
	var err error
	if keepSession == nil {
		err = tx.exec(`DELETE FROM sessions WHERE operator_id = ?`, operatorID)
	} else {
		err = tx.exec(`DELETE FROM sessions WHERE operator_id = ? AND token_hash != ?`, operatorID, keepSession)
	}
	if err != nil {
		return err
	}
	return tx.exec(`DELETE FROM api_tokens WHERE operator_id = ?`, operatorID)
}

// RemoveOperator deletes an operator with their sessions, API tokens, memberships and read
// marks, and unassigns their conversations. Their messages stay: they carry the author's
// name, not a reference.
func (tx *Tx) RemoveOperator(operatorID int64) error {
	for _, sql := range []string{
		`DELETE FROM conversation_reads WHERE operator_id = ?`,
		`UPDATE conversations SET assignee_id = 0 WHERE assignee_id = ?`,
		`DELETE FROM sessions WHERE operator_id = ?`,
		`DELETE FROM api_tokens WHERE operator_id = ?`,
		`DELETE FROM site_members WHERE operator_id = ?`,
		`DELETE FROM operators WHERE id = ?`,
	} {
		if err := tx.exec(sql, operatorID); err != nil {
			return err
		}
	}
	return nil
}

func (tx *Tx) siteIDByKey(key string) (int64, error) {
	var id int64
	found, err := tx.QueryRow(`SELECT id FROM sites WHERE key = ?`, []any{key}, &id)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no site has the key %q (see `edge site list`)", key)
	}
	return id, nil
}

func (tx *Tx) addMember(siteKey string, operatorID int64, role Role) error {
	siteID, err := tx.siteIDByKey(siteKey)
	if err != nil {
		return err
	}
	return tx.exec(`INSERT OR IGNORE INTO site_members (site_id, operator_id, role) VALUES (?, ?, ?)`, siteID, operatorID, string(role))
}

// AddMember makes an operator a member of a site (by key) in role; added is false when they
// were one (their role is left as it was).
func (tx *Tx) AddMember(siteKey string, operatorID int64, role Role) (added bool, err error) {
	if err := tx.addMember(siteKey, operatorID, role); err != nil {
		return false, err
	}
	return tx.c.Changes() == 1, nil
}

// RemoveMember ends an operator's membership of a site (by key): RemoveSiteMember, as the
// CLI does it (the site's only member may go).
func (tx *Tx) RemoveMember(siteKey string, operatorID int64) (removed bool, err error) {
	siteID, err := tx.siteIDByKey(siteKey)
	if err != nil {
		return false, err
	}
	return tx.RemoveSiteMember(siteID, operatorID, true)
}

// CheckPassword reports whether password is the operator's current one.
func (s *Store) CheckPassword(ctx context.Context, operatorID int64, password string) (bool, error) {
	var hash string
	var found bool
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT password_hash FROM operators WHERE id = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{operatorID}, &hash)
		return err
	})
	if err != nil || !found {
		return false, err
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil, nil
}

// OperatorListing is an operator with the keys of their sites, as `edge operator list`
// shows it.
type OperatorListing struct {
	Operator
	SiteKeys []string `json:"site_keys"`
	Sessions int      `json:"sessions"`
	Tokens   int      `json:"api_tokens"`
	keys     string
}

// Operators lists every operator by id.
func (s *Store) Operators(ctx context.Context) ([]OperatorListing, error) {
	list, err := readList(ctx, s, `SELECT o.id, o.email, o.name,
			coalesce((SELECT group_concat(s.key, char(10)) FROM site_members m JOIN sites s ON s.id = m.site_id WHERE m.operator_id = o.id), ''),
			(SELECT count(*) FROM sessions x WHERE x.operator_id = o.id AND x.expires_at > ?1),
			(SELECT count(*) FROM api_tokens t WHERE t.operator_id = o.id)
			FROM operators o ORDER BY o.id`,
		[]any{time.Now().UnixMilli()}, func(l *OperatorListing) []any {
			return []any{&l.ID, &l.Email, &l.Name, &l.keys, &l.Sessions, &l.Tokens}
		})
	for i := range list {
		list[i].SiteKeys = splitLines(list[i].keys)
		if list[i].SiteKeys == nil {
			list[i].SiteKeys = []string{}
		}
	}
	return list, err
}
