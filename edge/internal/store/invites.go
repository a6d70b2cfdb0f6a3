package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"spookat/schema"
)

// Invitations to a site's team: an owner names an email and a role, the edge keeps the
// SHA-256 of a single-use token and mails its link (the worker's email lane); whoever opens
// the link before it expires sets a password (or proves theirs, for an existing account) and
// joins the site in that role.

// InviteTTL is how long an invitation's link works.
const InviteTTL = 72 * time.Hour

// Invite is an invitation as the site's owners see it.
type Invite struct {
	ID        int64                 `json:"id"`
	SiteID    int64                 `json:"site_id"`
	Email     string                `json:"email"`
	Role      Role                  `json:"role"`
	InvitedBy string                `json:"invited_by"` // the owner's name or email ("" when gone)
	CreatedAt int64                 `json:"created_at"`
	ExpiresAt int64                 `json:"expires_at"`
	UsedAt    int64                 `json:"used_at,omitempty"`
	Status    schema.DeliveryStatus `json:"status"` // of its email: queued, delivered, retrying, dead
	LastError string                `json:"last_error,omitempty"`
}

// ErrInviteInvalid wraps what is wrong with an invitation asked for, in a sentence.
var ErrInviteInvalid = errors.New("invalid invitation")

// ErrInviteGone is a link that does not work (never issued, used, expired or revoked): the
// same answer for all, so a guess learns nothing.
var ErrInviteGone = errors.New("this invitation link does not work: it was used, it expired or it was withdrawn; ask the site's owner for a new one")

type inviteError struct{ msg string }

func (e *inviteError) Error() string { return e.msg }
func (e *inviteError) Unwrap() error { return ErrInviteInvalid }

const inviteColumns = `i.id, i.site_id, i.email, i.role, coalesce(nullif(o.name, ''), o.email, ''), i.created_at, i.expires_at, i.used_at, i.status, i.last_error
	FROM invites i LEFT JOIN operators o ON o.id = i.invited_by`

func (v *Invite) dest() []any {
	return []any{&v.ID, &v.SiteID, &v.Email, (*string)(&v.Role), &v.InvitedBy, &v.CreatedAt, &v.ExpiresAt, &v.UsedAt, (*string)(&v.Status), &v.LastError}
}

// CreateInvite records an owner's invitation of email to the site in role; tokenHash is the
// link's token's SHA-256. An earlier unused invitation of the same email to the site is
// withdrawn (one link works at a time); a member's email is refused.
func (tx *Tx) CreateInvite(siteID int64, email string, role Role, by int64, tokenHash []byte) (*Invite, error) {
	email = strings.TrimSpace(email)
	if err := CheckEmail(email); err != nil {
		return nil, &inviteError{"The email " + err.Error() + "."}
	}
	if _, err := ParseRole(string(role)); err != nil {
		return nil, &inviteError{strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + "."}
	}
	var member int
	if _, err := tx.QueryRow(`SELECT count(*) FROM site_members m JOIN operators o ON o.id = m.operator_id WHERE m.site_id = ? AND o.email = ? COLLATE NOCASE`,
		[]any{siteID, email}, &member); err != nil {
		return nil, err
	}
	if member > 0 {
		return nil, &inviteError{fmt.Sprintf("%s is a member of this site already: change their role in the list instead.", email)}
	}
	if err := tx.exec(`DELETE FROM invites WHERE site_id = ? AND email = ? COLLATE NOCASE AND used_at = 0`, siteID, email); err != nil {
		return nil, err
	}
	expires := tx.now + InviteTTL.Milliseconds()
	if err := tx.exec(`INSERT INTO invites (site_id, email, role, token_hash, invited_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		siteID, email, string(role), tokenHash, by, tx.now, expires); err != nil {
		return nil, err
	}
	v := &Invite{}
	if _, err := tx.QueryRow(`SELECT `+inviteColumns+` WHERE i.id = ?`, []any{tx.LastInsertRowID()}, v.dest()...); err != nil {
		return nil, err
	}
	return v, nil
}

// Invites lists a site's invitations not yet used, newest first (expired ones too, marked by
// their expires_at, until withdrawn).
func (s *Store) Invites(ctx context.Context, siteID int64) ([]Invite, error) {
	return readList(ctx, s, `SELECT `+inviteColumns+` WHERE i.site_id = ? AND i.used_at = 0 ORDER BY i.id DESC`, []any{siteID}, (*Invite).dest)
}

// WithdrawInvite deletes one of a site's unused invitations (ErrNotFound otherwise).
func (tx *Tx) WithdrawInvite(siteID, id int64) error {
	if err := tx.exec(`DELETE FROM invites WHERE id = ? AND site_id = ? AND used_at = 0`, id, siteID); err != nil {
		return err
	}
	if tx.c.Changes() == 0 {
		return ErrNotFound
	}
	return nil
}

// InviteByToken finds the working invitation of a token (ErrInviteGone otherwise), with the
// site's name and whether its email has an account already.
func (s *Store) InviteByToken(ctx context.Context, tokenHash []byte, now time.Time) (v Invite, site string, account bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT ` + inviteColumns + ` WHERE i.token_hash = ? AND i.used_at = 0 AND i.expires_at > ?`)
		if err != nil {
			return err
		}
		found, err := queryRow(st, []any{tokenHash, now.UnixMilli()}, v.dest()...)
		if err != nil {
			return err
		}
		if !found {
			return ErrInviteGone
		}
		st, err = q.Stmt(`SELECT s.name, (SELECT count(*) FROM operators WHERE email = ? COLLATE NOCASE) FROM sites s WHERE s.id = ?`)
		if err != nil {
			return err
		}
		_, err = queryRow(st, []any{v.Email, v.SiteID}, &site, &account)
		return err
	})
	return v, site, account, err
}

// AcceptInvite spends a working invitation: the operator of its email (created with hash, a
// HashPassword of the invitee's choice, and name when there is none; an existing one must
// have been checked by the caller) becomes a member of the site in its role.
func (tx *Tx) AcceptInvite(tokenHash []byte, name, hash string) (*Invite, *Operator, error) {
	v := &Invite{}
	found, err := tx.QueryRow(`SELECT `+inviteColumns+` WHERE i.token_hash = ? AND i.used_at = 0 AND i.expires_at > ?`, []any{tokenHash, tx.now}, v.dest()...)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, ErrInviteGone
	}
	op, exists, err := tx.OperatorByEmail(v.Email)
	if err != nil {
		return nil, nil, err
	}
	if !exists {
		if hash == "" {
			return nil, nil, errors.New("a new operator needs a password hash")
		}
		if name = strings.TrimSpace(name); name == "" {
			name, _, _ = strings.Cut(v.Email, "@")
		}
		op = Operator{Email: v.Email, Name: name}
		if _, err := tx.QueryRow(`INSERT INTO operators (email, name, password_hash, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
			[]any{v.Email, name, hash, tx.now}, &op.ID); err != nil {
			return nil, nil, err
		}
	}
	if err := tx.exec(`INSERT INTO site_members (site_id, operator_id, role) VALUES (?, ?, ?)
		ON CONFLICT (site_id, operator_id) DO NOTHING`, v.SiteID, op.ID, string(v.Role)); err != nil {
		return nil, nil, err
	}
	if err := tx.exec(`UPDATE invites SET used_at = ? WHERE id = ?`, tx.now, v.ID); err != nil {
		return nil, nil, err
	}
	v.UsedAt = tx.now
	return v, &op, nil
}

// RecordInviteDelivery stores how an invitation's email went (a worker's result); found is
// false for an invitation the site does not have (withdrawn meanwhile, or a forged result).
// A late "retrying" does not undo "delivered".
func (tx *Tx) RecordInviteDelivery(r *schema.Result) (found bool, err error) {
	if err := tx.exec(`UPDATE invites SET status = ?, last_error = ? WHERE id = ? AND site_id = ?
		AND NOT (status = 'delivered' AND ? = 'retrying')`, string(r.Status), r.Error, r.InviteID, r.SiteID, string(r.Status)); err != nil {
		return false, err
	}
	if tx.c.Changes() == 1 {
		return true, nil
	}
	var n int
	_, err = tx.QueryRow(`SELECT count(*) FROM invites WHERE id = ? AND site_id = ?`, []any{r.InviteID, r.SiteID}, &n)
	return n == 1, err
}
