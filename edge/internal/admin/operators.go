package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"spookat/edge/internal/store"
)

// Sessions closes an operator's live websockets after their rights changed; inbox.Hub
// implements it inside the running edge.
type Sessions interface {
	// EndOperator: every session and token of theirs was revoked.
	EndOperator(operatorID int64)
	// SitesChanged: a membership was taken away; the inbox reconnects with its new sites.
	SitesChanged(operatorID int64)
}

// PasswordRequest sets an operator's password.
type PasswordRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// OperatorRef names an operator by email.
type OperatorRef struct {
	Email string `json:"email"`
}

// OperatorInfo is an operator as `edge operator list` shows it.
type OperatorInfo = store.OperatorListing

// MemberRequest adds or removes a site membership.
type MemberRequest struct {
	SiteKey string `json:"site_key"`
	Email   string `json:"email"`
	// Role is the new member's (AddMember; "" is owner, as every member was before roles).
	Role store.Role `json:"role,omitempty"`
}

// MemberResult says whether the membership changed (false: it already was as asked).
type MemberResult struct {
	Operator store.Operator `json:"operator"`
	SiteKey  string         `json:"site_key"`
	Changed  bool           `json:"changed"`
	// Live: a running edge applied it (and closed the operator's sockets on a removal).
	Live bool `json:"live"`
}

func noOperator(email string) error {
	return fmt.Errorf("no operator has the email %q (see `edge operator list`)", email)
}

// operator finds req's operator inside a write transaction.
func operator(tx *store.Tx, email string) (store.Operator, error) {
	email = strings.TrimSpace(email)
	if email == "" {
		return store.Operator{}, errors.New("-email is required, e.g. -email ann@shop.example")
	}
	op, found, err := tx.OperatorByEmail(email)
	if err == nil && !found {
		err = noOperator(email)
	}
	return op, err
}

func (o *Ops) endOperator(id int64) {
	if o.Sessions != nil {
		o.Sessions.EndOperator(id)
	}
}

// SetPassword sets a new password and revokes every session and API token of the operator;
// inside a running edge their websockets close at once.
func (o *Ops) SetPassword(ctx context.Context, req PasswordRequest) (*store.Operator, error) {
	hash, err := store.HashPassword(req.Password)
	if err != nil {
		return nil, err
	}
	var op store.Operator
	err = o.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if op, err = operator(tx, req.Email); err != nil {
			return err
		}
		if err := tx.SetOperatorPassword(op.ID, hash, nil); err != nil {
			return err
		}
		return tx.Audit(store.AuditEntry{OperatorID: op.ID, Actor: store.ActorCLI, Action: store.AuditPasswordChanged})
	})
	if err != nil {
		return nil, err
	}
	o.endOperator(op.ID)
	return &op, nil
}

// RemoveOperator deletes an operator, their sessions, tokens and memberships.
func (o *Ops) RemoveOperator(ctx context.Context, req OperatorRef) (*store.Operator, error) {
	var op store.Operator
	err := o.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if op, err = operator(tx, req.Email); err != nil {
			return err
		}
		if err := tx.RemoveOperator(op.ID); err != nil {
			return err
		}
		return tx.Audit(store.AuditEntry{OperatorID: op.ID, Actor: store.ActorCLI, Action: store.AuditOperatorRemoved, Detail: map[string]any{"email": op.Email}})
	})
	if err != nil {
		return nil, err
	}
	o.endOperator(op.ID)
	return &op, nil
}

// ListOperators lists every operator with their sites.
func (o *Ops) ListOperators(ctx context.Context) ([]OperatorInfo, error) {
	return o.Store.Operators(ctx)
}

func (o *Ops) member(ctx context.Context, req MemberRequest, add bool) (*MemberResult, error) {
	if req.SiteKey == "" {
		return nil, errors.New("-site is required, e.g. -site st_… (see `edge site list`)")
	}
	res := &MemberResult{SiteKey: req.SiteKey, Live: o.Sessions != nil}
	err := o.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if res.Operator, err = operator(tx, req.Email); err != nil {
			return err
		}
		if add {
			role := req.Role
			if role == "" {
				role = store.RoleOwner
			}
			if _, err := store.ParseRole(string(role)); err != nil {
				return err
			}
			res.Changed, err = tx.AddMember(req.SiteKey, res.Operator.ID, role)
		} else {
			res.Changed, err = tx.RemoveMember(req.SiteKey, res.Operator.ID)
		}
		if err != nil || !res.Changed {
			return err
		}
		var siteID int64
		if _, err := tx.QueryRow(`SELECT id FROM sites WHERE key = ?`, []any{req.SiteKey}, &siteID); err != nil {
			return err
		}
		e := store.AuditEntry{SiteID: siteID, Actor: store.ActorCLI, Action: store.AuditMemberRemoved, Detail: map[string]any{"operator_id": res.Operator.ID}}
		if add {
			e.Action, e.Detail["role"] = store.AuditMemberAdded, cmp.Or(req.Role, store.RoleOwner)
		}
		return tx.Audit(e)
	})
	if err != nil {
		return nil, err
	}
	if !add && res.Changed && o.Sessions != nil {
		o.Sessions.SitesChanged(res.Operator.ID)
	}
	return res, nil
}

// AddMember makes an existing operator a member of a site.
func (o *Ops) AddMember(ctx context.Context, req MemberRequest) (*MemberResult, error) {
	return o.member(ctx, req, true)
}

// RemoveMember ends a membership: the site's API routes refuse the operator from the next
// request (membership is checked on each), and their websockets close so they stop
// receiving the site's events.
func (o *Ops) RemoveMember(ctx context.Context, req MemberRequest) (*MemberResult, error) {
	return o.member(ctx, req, false)
}

// SetPassword implements API.
func (c *Client) SetPassword(ctx context.Context, req PasswordRequest) (*store.Operator, error) {
	return call[store.Operator](ctx, c, http.MethodPost, "/operators/password", req)
}

// RemoveOperator implements API.
func (c *Client) RemoveOperator(ctx context.Context, req OperatorRef) (*store.Operator, error) {
	return call[store.Operator](ctx, c, http.MethodPost, "/operators/remove", req)
}

// ListOperators implements API.
func (c *Client) ListOperators(ctx context.Context) ([]OperatorInfo, error) {
	out, err := call[[]OperatorInfo](ctx, c, http.MethodGet, "/operators", nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// AddMember implements API.
func (c *Client) AddMember(ctx context.Context, req MemberRequest) (*MemberResult, error) {
	return call[MemberResult](ctx, c, http.MethodPost, "/members", req)
}

// RemoveMember implements API.
func (c *Client) RemoveMember(ctx context.Context, req MemberRequest) (*MemberResult, error) {
	return call[MemberResult](ctx, c, http.MethodPost, "/members/remove", req)
}
