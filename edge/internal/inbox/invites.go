package inbox

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Invitations (owners): POST /sites/:site/invites {"email","role"} records one and publishes
// its email job (the worker's email lane mails the link); GET lists the unused ones with how
// their email went; DELETE /sites/:site/invites/:id withdraws one. The invitee, not logged in:
// POST /invites/peek {"token"} says what the link is for, POST /invites/accept
// {"token","name","password"} joins (a new account takes the password; an existing one must
// give its own) and logs in. The token travels in the link's fragment and in request bodies,
// never in a URL a server logs.

// invitesEvent says a site's invitations changed (one made, withdrawn, used, or its email's
// status moved).
type invitesEvent struct {
	Type   string `json:"type"` // "invites"
	SiteID int64  `json:"site_id"`
}

// PlanNotice tells the site's open inboxes something about its plan (a limit reached).
func (h *Hub) PlanNotice(siteID int64, text string) {
	h.send(siteID, planEvent{Type: "plan", SiteID: siteID, Message: text})
}

type planEvent struct {
	Type    string `json:"type"` // "plan"
	SiteID  int64  `json:"site_id"`
	Message string `json:"message"`
}

// InvitesChanged tells the site's inboxes to read its invitations again.
func (h *Hub) InvitesChanged(siteID int64) {
	h.send(siteID, invitesEvent{Type: "invites", SiteID: siteID})
}

func (h *Handler) invite(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	var req struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if err := c.BodyParser(&req); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", `The body must be {"email":"…","role":"agent"}.`)
	}
	if req.Role == "" {
		req.Role = string(store.RoleAgent)
	}
	me := current(c).op
	token := randomToken(32)
	ctx, cancel := reqCtx(c)
	defer cancel()
	var v *store.Invite
	err = h.Store.WriteDurable(ctx, func(tx *store.Tx) (err error) {
		if err := h.planSeats(tx, s.ID, true); err != nil {
			return err
		}
		if v, err = tx.CreateInvite(s.ID, req.Email, store.Role(req.Role), me.ID, hashToken(token)); err != nil {
			return err
		}
		return tx.Audit(h.entry(c, s.ID, store.AuditInviteCreated, map[string]any{"invite_id": v.ID, "email": v.Email, "role": v.Role}))
	})
	if errors.Is(err, store.ErrInviteInvalid) {
		return fail(c, fiber.StatusBadRequest, "invalid", err.Error())
	}
	if pe, ok := errors.AsType[planError](err); ok {
		return fail(c, fiber.StatusConflict, schema.CodePlanLimit, string(pe))
	}
	if err != nil {
		return busy(c, err)
	}
	link := h.PublicURL + "/app/#/invite/" + token
	by := me.Name
	if by == "" {
		by = me.Email
	}
	job := &schema.Job{ID: schema.InviteJobID(v.ID), Lane: schema.LaneEmail, Target: schema.TargetEmail, SiteID: s.ID,
		Author: schema.AuthorSystem, To: v.Email, CreatedAt: time.Now(),
		Invite: &schema.Invite{ID: v.ID, Site: s.Name, By: by, Role: string(v.Role), Link: link, Expires: time.UnixMilli(v.ExpiresAt)}}
	if h.PublishJob == nil {
		err = errors.New("no job publisher")
	} else {
		err = h.PublishJob(ctx, job)
	}
	if err != nil {
		// Recorded, not mailed: the owner still has the link to pass on.
		h.Log.Warn("invitation email not published", "site", s.ID, "invite", v.ID, "err", err)
		v.Status, v.LastError = schema.StatusDead, "not handed to the email lane: "+err.Error()
		_ = h.Store.Write(context.WithoutCancel(ctx), func(tx *store.Tx) error {
			_, err := tx.RecordInviteDelivery(&schema.Result{InviteID: v.ID, SiteID: s.ID, Status: v.Status, Error: v.LastError})
			return err
		})
	}
	h.Hub.InvitesChanged(s.ID)
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"invite": v, "link": link})
}

func (h *Handler) invites(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.Invites(ctx, s.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"site_id": s.ID, "invites": list})
}

func (h *Handler) withdrawInvite(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	id, err := parseID(c.Params("id"))
	if err != nil {
		return fail(c, fiber.StatusNotFound, "not_found", "No such invitation.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	e := h.entry(c, s.ID, store.AuditInviteWithdrawn, map[string]any{"invite_id": id})
	if err := h.Store.Write(ctx, func(tx *store.Tx) error {
		if err := tx.WithdrawInvite(s.ID, id); err != nil {
			return err
		}
		return tx.Audit(e)
	}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fail(c, fiber.StatusNotFound, "not_found", "No such invitation in this site (used, or withdrawn already).")
		}
		return busy(c, err)
	}
	h.Hub.InvitesChanged(s.ID)
	return c.SendStatus(fiber.StatusNoContent)
}

type inviteToken struct {
	Token    string `json:"token"`
	Name     string `json:"name"`
	Password string `json:"password"`
}

// readInvite reads the body's token and finds its invitation; the answer for a token that
// does not work is the same whatever the reason. Guesses count against the address like
// wrong passwords.
func (h *Handler) readInvite(c *fiber.Ctx) (req inviteToken, v store.Invite, site string, account bool, err error) {
	if !sameOrigin(c) {
		return req, v, "", false, fail(c, fiber.StatusForbidden, "csrf", "Open the invitation from the inbox's own page.")
	}
	if err := c.BodyParser(&req); err != nil || req.Token == "" || len(req.Token) > 100 {
		return req, v, "", false, fail(c, fiber.StatusBadRequest, "invalid", `The body must be {"token":"…"} with the token of the link.`)
	}
	addr := h.IPs.IP(c).String()
	// Counted per address: a guesser elsewhere must not slow an invitee down.
	if refused, err := h.admitPassword(c, addr, "invite:"+addr, "invitation"); refused {
		return req, v, "", false, err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	v, site, account, err = h.Store.InviteByToken(ctx, hashToken(req.Token), time.Now())
	if errors.Is(err, store.ErrInviteGone) {
		h.Limiter.Failed(addr, "invite:"+addr)
		return req, v, "", false, fail(c, fiber.StatusNotFound, "gone", sentence(err))
	}
	return req, v, site, account, err
}

func (h *Handler) peekInvite(c *fiber.Ctx) error {
	_, v, site, account, err := h.readInvite(c)
	if v.ID == 0 {
		return err
	}
	return c.JSON(fiber.Map{"site": site, "email": v.Email, "role": v.Role, "account": account, "invited_by": v.InvitedBy, "expires_at": v.ExpiresAt})
}

func (h *Handler) acceptInvite(c *fiber.Ctx) error {
	req, v, _, account, err := h.readInvite(c)
	if v.ID == 0 {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	hash := ""
	if account {
		// Joining with an account of one's own: its password, checked as a login is.
		op, ok, err := h.Store.OperatorLogin(ctx, v.Email, req.Password)
		if err != nil {
			return err
		}
		if !ok {
			h.passwordFailed(h.IPs.IP(c).String(), strings.ToLower(v.Email), op.ID)
			return fail(c, fiber.StatusUnauthorized, "unauthorized", "That is not the password of "+v.Email+"'s account.")
		}
	} else if hash, err = store.HashPassword(req.Password); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", sentence(err))
	}
	ns := startSession()
	var op *store.Operator
	err = h.Store.WriteDurable(ctx, func(tx *store.Tx) (err error) {
		if err := h.planSeats(tx, v.SiteID, false); err != nil {
			return err
		}
		if _, op, err = tx.AcceptInvite(hashToken(req.Token), req.Name, hash); err != nil {
			return err
		}
		if err := ns.add(tx, op.ID); err != nil {
			return err
		}
		return tx.Audit(h.entryAs(c, op.ID, op.Email, v.SiteID, store.AuditInviteAccepted, map[string]any{"invite_id": v.ID, "role": v.Role}))
	})
	if errors.Is(err, store.ErrInviteGone) { // used or withdrawn a moment ago
		return fail(c, fiber.StatusNotFound, "gone", sentence(err))
	}
	if pe, ok := errors.AsType[planError](err); ok {
		return fail(c, fiber.StatusConflict, schema.CodePlanLimit, string(pe)+" Ask the site's owner.")
	}
	if err != nil {
		return busy(c, err)
	}
	h.Hub.MembersChanged(v.SiteID)
	h.Hub.InvitesChanged(v.SiteID)
	h.Hub.SitesChanged(op.ID) // an existing account's open inboxes start watching the site
	return ns.answer(c, op)
}
