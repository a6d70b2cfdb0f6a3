package store

import (
	"context"
	"errors"
	"fmt"
)

// The team of a site: its members and what each may do. Owners change the site's settings,
// channels, secrets and members; agents answer. A site keeps at least one owner.

// Role is what a member of a site may do.
type Role string

const (
	RoleOwner Role = "owner"
	RoleAgent Role = "agent"
)

// ParseRole reads a role as the API and the CLI spell it.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOwner, RoleAgent:
		return r, nil
	}
	return "", fmt.Errorf("role %q is not one: use owner (settings, channels, members) or agent (answers)", s)
}

// ErrLastOwner refuses to leave a site without an owner.
var ErrLastOwner = errors.New("a site keeps at least one owner: make another member an owner first")

// MemberRole is the operator's role in the site ("" for none: not a member).
func (s *Store) MemberRole(ctx context.Context, operatorID, siteID int64) (Role, error) {
	var role Role
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT role FROM site_members WHERE site_id = ? AND operator_id = ?`)
		if err != nil {
			return err
		}
		_, err = queryRow(st, []any{siteID, operatorID}, (*string)(&role))
		return err
	})
	return role, err
}

// memberRole is the operator's role in the site inside a write ("" for none).
func (tx *Tx) memberRole(siteID, operatorID int64) (Role, error) {
	var role string
	_, err := tx.QueryRow(`SELECT role FROM site_members WHERE site_id = ? AND operator_id = ?`, []any{siteID, operatorID}, &role)
	return Role(role), err
}

// keepsAnOwner refuses a change that would take the site's last owner away from operatorID,
// unless leaveEmpty and nobody else is a member.
func (tx *Tx) keepsAnOwner(siteID, operatorID int64, leaveEmpty bool) error {
	var owners, others int
	if _, err := tx.QueryRow(`SELECT count(*) FILTER (WHERE role = 'owner'), count(*) FROM site_members WHERE site_id = ? AND operator_id != ?`,
		[]any{siteID, operatorID}, &owners, &others); err != nil {
		return err
	}
	if owners == 0 && !(leaveEmpty && others == 0) {
		return ErrLastOwner
	}
	return nil
}

// SetMemberRole changes a member's role (ErrNotFound for no such member); changed is false
// when it was that already. The last owner cannot become an agent.
func (tx *Tx) SetMemberRole(siteID, operatorID int64, role Role) (changed bool, err error) {
	cur, err := tx.memberRole(siteID, operatorID)
	switch {
	case err != nil:
		return false, err
	case cur == "":
		return false, ErrNotFound
	case cur == role:
		return false, nil
	case cur == RoleOwner:
		if err := tx.keepsAnOwner(siteID, operatorID, false); err != nil {
			return false, err
		}
	}
	return true, tx.exec(`UPDATE site_members SET role = ? WHERE site_id = ? AND operator_id = ?`, string(role), siteID, operatorID)
}

// RemoveSiteMember ends an operator's membership of a site; removed is false when they were
// not a member. The last owner stays, unless leaveEmpty and they are the site's only member
// (the CLI: the box's owner may empty a site; the inbox may not). Their read marks of the
// site's conversations go with it, and the site's conversations assigned to them are
// unassigned.
func (tx *Tx) RemoveSiteMember(siteID, operatorID int64, leaveEmpty bool) (removed bool, err error) {
	cur, err := tx.memberRole(siteID, operatorID)
	if err != nil || cur == "" {
		return false, err
	}
	if cur == RoleOwner {
		if err := tx.keepsAnOwner(siteID, operatorID, leaveEmpty); err != nil {
			return false, err
		}
	}
	if err := tx.exec(`DELETE FROM site_members WHERE site_id = ? AND operator_id = ?`, siteID, operatorID); err != nil {
		return false, err
	}
	if err := tx.exec(`UPDATE conversations SET assignee_id = 0 WHERE assignee_id = ? AND site_id = ?`, operatorID, siteID); err != nil {
		return false, err
	}
	return true, tx.exec(`DELETE FROM conversation_reads WHERE operator_id = ?
		AND conversation_id IN (SELECT id FROM conversations WHERE site_id = ?)`, operatorID, siteID)
}

// Seats counts a site's members and the invitations not yet used (the seats a plan's
// operators limit counts).
func (tx *Tx) Seats(siteID int64, invitesToo bool) (n int, err error) {
	if !invitesToo {
		_, err = tx.QueryRow(`SELECT count(*) FROM site_members WHERE site_id = ?`, []any{siteID}, &n)
		return n, err
	}
	_, err = tx.QueryRow(`SELECT (SELECT count(*) FROM site_members WHERE site_id = ?1) + (SELECT count(*) FROM invites WHERE site_id = ?1 AND used_at = 0 AND expires_at > ?2)`,
		[]any{siteID, tx.now}, &n)
	return n, err
}
