package inbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Sharing the work: assignment, snooze, teammates and unread counts. Changes go through the
// writer as internal system messages (store.Assign, store.Snooze); the commit tells every
// operator socket of the site.

// maxSnooze is the furthest a snooze may reach.
const maxSnooze = 365 * 24 * time.Hour

type snoozeRequest struct {
	Until string `json:"until"` // RFC 3339
}

func (h *Handler) snooze(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	var req snoozeRequest
	if err := c.BodyParser(&req); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", `The body must be JSON: {"until": "2026-12-05T09:00:00+01:00"}.`)
	}
	until, err := time.Parse(time.RFC3339, req.Until)
	if err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", `until must be a time in RFC 3339, with its offset: "2026-12-05T09:00:00+01:00".`)
	}
	now := time.Now()
	if !until.After(now.Add(time.Minute)) || until.After(now.Add(maxSnooze)) {
		return fail(c, fiber.StatusBadRequest, "invalid", "until must be at least a minute from now and at most a year.")
	}
	if cv.Status == schema.ConvClosed {
		return fail(c, fiber.StatusConflict, "closed", "The conversation is closed: reopen it to snooze it.")
	}
	until = until.Truncate(time.Millisecond)
	ctx, cancel := reqCtx(c)
	defer cancel()
	if _, err := h.Store.Snooze(ctx, cv.SiteID, cv.ID, until, displayName(current(c).op)); err != nil {
		return busy(c, err)
	}
	return c.JSON(fiber.Map{"id": cv.ID, "status": schema.ConvSnoozed, "snoozed_until": until.UnixMilli()})
}

type assignRequest struct {
	OperatorID *int64 `json:"operator_id"` // 0: nobody
}

func (h *Handler) assign(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	var req assignRequest
	if err := c.BodyParser(&req); err != nil || req.OperatorID == nil {
		return fail(c, fiber.StatusBadRequest, "invalid", `The body must be JSON: {"operator_id": 12}, or 0 to unassign.`)
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	name := ""
	if id := *req.OperatorID; id != 0 {
		members, err := h.Store.SiteMembers(ctx, cv.SiteID)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.ID == id {
				name = m.Name
				if name == "" {
					name = m.Email
				}
			}
		}
		if name == "" {
			return fail(c, fiber.StatusBadRequest, "invalid", "operator_id "+strconv.FormatInt(id, 10)+
				" is not a member of this conversation's site: pick one from GET /v1/api/sites/{site}/members.")
		}
	}
	if _, err := h.Store.Assign(ctx, cv.SiteID, cv.ID, *req.OperatorID, name, displayName(current(c).op)); err != nil {
		return busy(c, err)
	}
	return c.JSON(fiber.Map{"id": cv.ID, "assignee_id": *req.OperatorID, "assignee_name": name})
}

func (h *Handler) members(c *fiber.Ctx) error {
	s, err := h.site(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.SiteMembers(ctx, s.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"site_id": s.ID, "members": list})
}

func (h *Handler) unread(c *fiber.Ctx) error {
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.SiteUnreads(ctx, current(c).op.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"sites": list})
}

// busy answers a change the writer could not take in time with 503; other errors go on.
func busy(c *fiber.Ctx, err error) error {
	if errors.Is(err, store.ErrBusy) || errors.Is(err, context.DeadlineExceeded) {
		return fail(c, fiber.StatusServiceUnavailable, schema.CodeUnavailable, "The server is too busy; try again.")
	}
	return err
}
