package inbox

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
)

// Canned replies: GET /sites/:site/canned lists them; POST adds one, PUT /sites/:site/canned/:id
// replaces one, DELETE removes one. Any operator of the site may manage them (they are the
// team's shared answers); every inbox of the site hears of a change at once (a "canned"
// event) and reads the list again.

type cannedRequest struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

// cannedEvent says a site's canned replies changed.
type cannedEvent struct {
	Type   string `json:"type"` // "canned"
	SiteID int64  `json:"site_id"`
}

func (h *Handler) cannedList(c *fiber.Ctx) error {
	s, err := h.site(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.CannedReplies(ctx, s.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"site_id": s.ID, "canned": list})
}

func (h *Handler) cannedSave(c *fiber.Ctx) error {
	s, err := h.site(c)
	if s == nil {
		return err
	}
	reply := store.CannedReply{SiteID: s.ID}
	if id := c.Params("id"); id != "" {
		if reply.ID, err = parseID(id); err != nil {
			return fail(c, fiber.StatusNotFound, "not_found", "No such canned reply.")
		}
	}
	var req cannedRequest
	if err := c.BodyParser(&req); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", `The body must be {"title":"…","text":"…"}.`)
	}
	reply.Title, reply.Text = req.Title, req.Text
	ctx, cancel := reqCtx(c)
	defer cancel()
	err = h.Store.Write(ctx, func(tx *store.Tx) error { return tx.SaveCanned(&reply, current(c).op.ID) })
	if err != nil {
		return h.cannedFailed(c, err)
	}
	h.Hub.send(s.ID, cannedEvent{Type: "canned", SiteID: s.ID})
	status := fiber.StatusOK
	if c.Method() == fiber.MethodPost {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(reply)
}

func (h *Handler) cannedDelete(c *fiber.Ctx) error {
	s, err := h.site(c)
	if s == nil {
		return err
	}
	id, err := parseID(c.Params("id"))
	if err != nil {
		return fail(c, fiber.StatusNotFound, "not_found", "No such canned reply.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	if err := h.Store.Write(ctx, func(tx *store.Tx) error { return tx.DeleteCanned(s.ID, id) }); err != nil {
		return h.cannedFailed(c, err)
	}
	h.Hub.send(s.ID, cannedEvent{Type: "canned", SiteID: s.ID})
	return c.SendStatus(fiber.StatusNoContent)
}

func (h *Handler) cannedFailed(c *fiber.Ctx, err error) error {
	switch {
	case errors.Is(err, store.ErrCannedInvalid):
		return fail(c, fiber.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, store.ErrNotFound):
		return fail(c, fiber.StatusNotFound, "not_found", "No such canned reply in this site.")
	}
	return err
}
