package inbox

import (
	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/files"
)

// file serves GET /v1/api/files/{id}: an attachment of a conversation of a site the operator
// is a member of. Anything else, another site's file included, is 404: the answer does not
// say whether the id exists.
func (h *Handler) file(c *fiber.Ctx) error {
	key := c.Params("key")
	notFound := func() error {
		return fail(c, fiber.StatusNotFound, "not_found", "No attachment with this id in your sites' conversations.")
	}
	if !files.ValidKey(key) {
		return notFound()
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	f, found, err := h.Store.FileByKey(ctx, key)
	if err != nil {
		return err
	}
	if !found || f.MessageID == 0 {
		return notFound()
	}
	ok, err := h.Store.IsMember(ctx, current(c).op.ID, f.SiteID)
	if err != nil {
		return err
	}
	if !ok {
		return notFound()
	}
	return h.Files.Serve(c, *f.Wire())
}
