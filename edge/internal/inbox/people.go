package inbox

import (
	"bufio"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/files"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
)

// person reads a request about one person of a site the operator owns: :site and
// ?visitor=N | email=E | user=U. s is nil when the answer is written (not an owner, a bad
// selector).
func (h *Handler) person(c *fiber.Ctx) (s *sites.Site, sel store.PersonSelector, err error) {
	if s, err = h.ownSite(c); s == nil {
		return nil, sel, err
	}
	sel = store.PersonSelector{Email: c.Query("email"), UserID: c.Query("user")}
	if v := c.Query("visitor"); v != "" {
		if sel.VisitorID, err = parseID(v); err != nil {
			return nil, sel, fail(c, fiber.StatusBadRequest, "invalid", "visitor must be a visitor's id (a number).")
		}
	}
	if err := sel.Check(); err != nil {
		return nil, sel, fail(c, fiber.StatusBadRequest, "invalid", sentence(err)+" (visitor=, email= or user=)")
	}
	return s, sel, nil
}

// erasePerson answers DELETE /sites/:site/people?visitor=N | email=E | user=U (owners): the
// person's visitors, conversations, messages, attachments, search entries and read markers
// are deleted to the bytes (files.ErasePerson). What had already gone to Slack, Discord,
// webhooks or email cannot be unsent: the answer lists it.
func (h *Handler) erasePerson(c *fiber.Ctx) error {
	s, sel, err := h.person(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	w := current(c)
	x := admin.Eraser{Store: h.Store, Files: h.Files, Registry: h.Sites, PublishJob: h.PublishJob}
	out, err := x.Erase(ctx, s.ID, s.Delivery != nil && s.Delivery.WebhookURL != "", sel,
		store.AuditEntry{OperatorID: w.op.ID, Actor: w.op.Email, Address: h.IPs.IP(c).String()})
	if errors.Is(err, store.ErrNotFound) {
		return fail(c, fiber.StatusNotFound, "not_found", "No visitor of this site matches: check the email, user id or visitor id.")
	}
	if err != nil {
		return busy(c, err)
	}
	h.Log.Info("person erased", "site", s.ID, "by", w.op.ID, "visitors", out.Visitors, "conversations", out.Conversations, "messages", out.Messages,
		"waiting_jobs", out.WaitingJobs, "webhook_event", out.WebhookEvent)
	h.Hub.send(s.ID, erasedEvent{Type: "erased", SiteID: s.ID})
	return c.JSON(fiber.Map{"erased": out.Erased, "wal_emptied": out.WALEmptied, "webhook_event": out.WebhookEvent, "waiting_jobs": out.WaitingJobs,
		"note": "Deleted here. What had gone to Slack, Discord, webhooks or email (listed in delivered) cannot be unsent from here."})
}

// erasedEvent says a person's conversations left the site: read the list again.
type erasedEvent struct {
	Type   string `json:"type"` // "erased"
	SiteID int64  `json:"site_id"`
}

// exportPerson answers GET /sites/:site/people/export?visitor=N | email=E | user=U (owners):
// everything the site holds about one person (store.ExportPerson) as a .tar.gz download,
// person.json and their attachments (files.WritePersonArchive).
func (h *Handler) exportPerson(c *fiber.Ctx) error {
	s, sel, err := h.person(c)
	if s == nil {
		return err
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
	h.audit(c, h.entry(c, s.ID, store.AuditPersonExported, map[string]any{"by": sel.Kind(), "visitors": len(p.Visitors), "conversations": len(p.Conversations)}))
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
