package inbox

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
)

// The team of a site in the inbox: GET /sites/:site/members (any member: whom to assign),
// PUT /sites/:site/members/:id {"role"} and DELETE /sites/:site/members/:id (owners). A
// removed member's sockets close at once (4403) and their next API call is refused; the
// site's last owner can be neither removed nor made an agent.

// membersEvent says a site's team changed (a role, a member gone or come).
type membersEvent struct {
	Type   string `json:"type"` // "members"
	SiteID int64  `json:"site_id"`
}

// MembersChanged tells the site's inboxes to read its team (and their own role) again.
func (h *Hub) MembersChanged(siteID int64) {
	h.send(siteID, membersEvent{Type: "members", SiteID: siteID})
}

// member reads :site, which the operator must own, and :id, a member's operator id; s is nil
// when the answer is written.
func (h *Handler) member(c *fiber.Ctx) (*sites.Site, int64, error) {
	s, err := h.ownSite(c)
	if s == nil {
		return nil, 0, err
	}
	id, err := parseID(c.Params("id"))
	if err != nil {
		return nil, 0, fail(c, fiber.StatusNotFound, "not_found", "No such member.")
	}
	return s, id, nil
}

func (h *Handler) setRole(c *fiber.Ctx) error {
	s, id, err := h.member(c)
	if s == nil {
		return err
	}
	var req struct {
		Role string `json:"role"`
	}
	if err := c.BodyParser(&req); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", `The body must be {"role":"owner"} or {"role":"agent"}.`)
	}
	role, err := store.ParseRole(req.Role)
	if err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", sentence(err))
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	var changed bool
	e := h.entry(c, s.ID, store.AuditRoleChanged, map[string]any{"operator_id": id, "role": role})
	err = h.Store.WriteDurable(ctx, func(tx *store.Tx) (err error) {
		if changed, err = tx.SetMemberRole(s.ID, id, role); err != nil || !changed {
			return err
		}
		return tx.Audit(e)
	})
	if err != nil {
		return teamFailed(c, err)
	}
	if changed {
		h.Hub.MembersChanged(s.ID)
	}
	return c.JSON(fiber.Map{"site_id": s.ID, "operator_id": id, "role": role})
}

func (h *Handler) removeMember(c *fiber.Ctx) error {
	s, id, err := h.member(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	var removed bool
	e := h.entry(c, s.ID, store.AuditMemberRemoved, map[string]any{"operator_id": id})
	err = h.Store.WriteDurable(ctx, func(tx *store.Tx) (err error) {
		if removed, err = tx.RemoveSiteMember(s.ID, id, false); err != nil || !removed {
			return err
		}
		return tx.Audit(e)
	})
	if err != nil {
		return teamFailed(c, err)
	}
	if !removed {
		return fail(c, fiber.StatusNotFound, "not_found", "No such member of this site.")
	}
	h.Hub.SitesChanged(id) // their sockets close now, and reconnect watching the sites left
	h.Hub.MembersChanged(s.ID)
	return c.SendStatus(fiber.StatusNoContent)
}

func teamFailed(c *fiber.Ctx, err error) error {
	switch {
	case errors.Is(err, store.ErrLastOwner):
		return fail(c, fiber.StatusConflict, "last_owner", sentence(err))
	case errors.Is(err, store.ErrNotFound):
		return fail(c, fiber.StatusNotFound, "not_found", "No such member of this site.")
	}
	return busy(c, err)
}
