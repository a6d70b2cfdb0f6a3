package inbox

import (
	"bufio"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/files"
	"spookat/edge/internal/jobs"
	"spookat/edge/internal/store"
)

// personSelector reads ?visitor=N | email=E | user=U; ok is false when the answer is written.
func personSelector(c *fiber.Ctx) (store.PersonSelector, bool, error) {
	sel := store.PersonSelector{Email: c.Query("email"), UserID: c.Query("user")}
	if v := c.Query("visitor"); v != "" {
		id, err := parseID(v)
		if err != nil {
			return sel, false, fail(c, fiber.StatusBadRequest, "invalid", "visitor must be a visitor's id (a number).")
		}
		sel.VisitorID = id
	}
	if err := sel.Check(); err != nil {
		return sel, false, fail(c, fiber.StatusBadRequest, "invalid", sentence(err)+" (visitor=, email= or user=)")
	}
	return sel, true, nil
}

// erasePerson answers DELETE /sites/:site/people?visitor=N | email=E | user=U (owners): the
// person's visitors, conversations, messages, attachments, search entries and read markers
// are deleted to the bytes (files.ErasePerson). What had already gone to Slack, Discord,
// webhooks or email cannot be unsent: the answer lists it.
func (h *Handler) erasePerson(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	sel, ok, err := personSelector(c)
	if !ok {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	e, emptied, err := files.ErasePerson(ctx, h.Store, h.Files, s.ID, sel)
	if errors.Is(err, store.ErrNotFound) {
		return fail(c, fiber.StatusNotFound, "not_found", "No visitor of this site matches: check the email, user id or visitor id.")
	}
	if err != nil {
		return busy(c, err)
	}
	h.Log.Info("person erased", "site", s.ID, "by", current(c).op.ID, "visitors", e.Visitors, "conversations", e.Conversations, "messages", e.Messages)
	h.audit(c, s.ID, store.AuditPersonErased, map[string]any{"by": sel.Kind(), "visitors": e.Visitors, "conversations": e.Conversations, "messages": e.Messages})
	h.Hub.send(s.ID, erasedEvent{Type: "erased", SiteID: s.ID})
	waiting := "dropped by the workers"
	if err := h.Sites.MarkErased(ctx, e.ConversationIDs, time.Now()); err != nil {
		h.Log.Warn("erased conversations not told to the workers", "site", s.ID, "err", err)
		waiting = "not dropped: " + err.Error()
	}
	webhook := "none: the site has no webhook"
	if s.Delivery != nil && s.Delivery.WebhookURL != "" {
		webhook = "queued"
		if h.PublishJob == nil {
			webhook = "not sent: no job publisher"
		} else if err := h.PublishJob(ctx, jobs.Erasure(s.ID, sel, e, time.Now())); err != nil {
			h.Log.Warn("erasure event not published", "site", s.ID, "err", err)
			webhook = "not sent: " + err.Error()
		}
	}
	return c.JSON(fiber.Map{"erased": e, "wal_emptied": emptied, "webhook_event": webhook, "waiting_jobs": waiting,
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
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	sel, ok, err := personSelector(c)
	if !ok {
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
	h.audit(c, s.ID, store.AuditPersonExported, map[string]any{"by": sel.Kind(), "visitors": len(p.Visitors), "conversations": len(p.Conversations)})
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
