package store

import (
	"context"
	"errors"
	"testing"

	"spookat/schema/testkit"
)

// Roles: the CLI's members are owners; an owner makes another member an agent or an owner;
// the last owner can be neither made an agent nor removed; a removed member's assignments go.
func TestTeamRoles(t *testing.T) {
	ctx := context.Background()
	s, site, ann := searchStore(t) // Ann: added as the CLI adds, an owner
	var bob *Operator
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) (err error) {
		if bob, err = tx.AddOperator("bob@example.com", "Bob", "correct horse battery", nil); err != nil {
			return err
		}
		_, err = tx.AddMember(site.Key, bob.ID, RoleAgent)
		return err
	}))
	role := func(op *Operator) Role {
		r, err := s.MemberRole(ctx, op.ID, site.ID)
		testkit.NoErr(t, err)
		return r
	}
	if role(ann) != RoleOwner || role(bob) != RoleAgent {
		t.Fatalf("roles %q, %q; want owner, agent", role(ann), role(bob))
	}
	write := func(fn func(tx *Tx) error) error { return s.WriteDurable(ctx, fn) }
	if err := write(func(tx *Tx) error { _, err := tx.SetMemberRole(site.ID, ann.ID, RoleAgent); return err }); !errors.Is(err, ErrLastOwner) {
		t.Fatalf("the last owner made an agent: %v", err)
	}
	if err := write(func(tx *Tx) error { _, err := tx.RemoveSiteMember(site.ID, ann.ID, false); return err }); !errors.Is(err, ErrLastOwner) {
		t.Fatalf("the last owner removed: %v", err)
	}
	if err := write(func(tx *Tx) error { _, err := tx.SetMemberRole(site.ID, 999, RoleAgent); return err }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a role for no member: %v", err)
	}
	testkit.NoErr(t, write(func(tx *Tx) error { _, err := tx.SetMemberRole(site.ID, bob.ID, RoleOwner); return err }))
	testkit.NoErr(t, write(func(tx *Tx) error { _, err := tx.SetMemberRole(site.ID, ann.ID, RoleAgent); return err })) // Bob owns it now
	if role(ann) != RoleAgent || role(bob) != RoleOwner {
		t.Fatalf("roles %q, %q; want agent, owner", role(ann), role(bob))
	}
	conv := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("v"), Author: "visitor", Text: "hi", ClientID: "1"})
	_, err := s.Assign(ctx, site.ID, conv.ConversationID, ann.ID, "Ann", "Bob")
	testkit.NoErr(t, err)
	var removed bool
	testkit.NoErr(t, write(func(tx *Tx) (err error) { removed, err = tx.RemoveSiteMember(site.ID, ann.ID, false); return err }))
	if !removed || role(ann) != "" {
		t.Fatalf("removed %v, role after %q", removed, role(ann))
	}
	c, err := s.Conversation(ctx, bob.ID, conv.ConversationID)
	testkit.NoErr(t, err)
	if c.AssigneeID != 0 {
		t.Errorf("the removed member's conversation is still assigned to %d", c.AssigneeID)
	}
	// The CLI may empty a site (its only member goes); the inbox may not.
	if err := write(func(tx *Tx) error { _, err := tx.RemoveSiteMember(site.ID, bob.ID, false); return err }); !errors.Is(err, ErrLastOwner) {
		t.Fatalf("the only member removed from the inbox: %v", err)
	}
	testkit.NoErr(t, write(func(tx *Tx) error { _, err := tx.RemoveMember(site.Key, bob.ID); return err }))
	if _, err := ParseRole("admin"); err == nil {
		t.Error("admin taken as a role")
	}
}
