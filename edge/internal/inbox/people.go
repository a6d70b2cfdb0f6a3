package inbox

import (
	"bufio"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/files"
	"spookat/edge/internal/store"
)

// exportPerson answers GET /sites/:site/people/export?visitor=N | email=E | user=U (owners):
// everything the site holds about one person (store.ExportPerson) as a .tar.gz download,
// person.json and their attachments (files.WritePersonArchive).
func (h *Handler) exportPerson(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	sel := store.PersonSelector{Email: c.Query("email"), UserID: c.Query("user")}
	if v := c.Query("visitor"); v != "" {
		if sel.VisitorID, err = parseID(v); err != nil {
			return fail(c, fiber.StatusBadRequest, "invalid", "visitor must be a visitor's id (a number).")
		}
	}
	if err := sel.Check(); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", sentence(err)+" (visitor=, email= or user=)")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	p, err := h.Store.ExportPerson(ctx, s.ID, sel)
	if errors.Is(err, store.ErrNotFound) {
		return fail(c, fiber.StatusNotFound, "not_found", "No visitor of this site matches: check the email, user id or visitor id.")
	}
	if err != nil {
		return busy(c, err)
	}
	c.Set(fiber.HeaderContentType, "application/gzip")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="spookat-person-`+time.Now().UTC().Format("20060102-150405")+`.tar.gz"`)
	dir, log := h.Files, h.Log
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		if err := files.WritePersonArchive(w, p, dir); err != nil {
			log.Error("person export cut short", "site", p.Site.ID, "err", err)
		}
		_ = w.Flush()
	})
	return nil
}
