package widget

import (
	"context"
	"crypto/sha256"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/files"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// upload answers POST /v1/widget/files?site=<key>: a multipart form with the visitor's token
// (field "visitor", as the hello gave it) and one file (field "file"). The file is checked
// (the site's size limit and quota, its type sniffed from its content), written to disk here
// (never on the SQLite writer's goroutine), then named in SQLite; the answer is its id, which
// the visitor's next message frame carries ("file"). Only that visitor's socket can send it.
//
// A multipart POST with no custom header is a simple request: a cross-origin page sends it
// without a CORS preflight, and the Origin it carries is checked against the site's.
func (h *Handler) upload(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	site := h.Sites.ByKey(c.Query("site"))
	if site == nil {
		return refuse(c, fiber.StatusNotFound, "unknown_site", "No site has this key: check data-site in the embed snippet.")
	}
	origin := c.Get(fiber.HeaderOrigin)
	if !site.AllowsOrigin(origin) {
		return refuse(c, fiber.StatusForbidden, "origin_not_allowed",
			"This page's origin is not in the site's allowed origins: add it in the site's settings.")
	}
	if origin != "" {
		c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		c.Set(fiber.HeaderVary, fiber.HeaderOrigin)
	}
	c.Set(fiber.HeaderAccessControlExposeHeaders, fiber.HeaderRetryAfter)
	limit := site.Widget.FileLimit()
	if limit == 0 {
		return h.refuseFile(c, fiber.StatusForbidden, schema.CodeFileRefused, "This site does not take attachments.")
	}
	token := c.FormValue("visitor")
	if !validToken(token) {
		return h.refuseFile(c, fiber.StatusBadRequest, schema.CodeInvalid,
			`Send the visitor token of the chat's hello in the form field "visitor".`)
	}
	fh, err := c.FormFile("file")
	if err != nil {
		return h.refuseFile(c, fiber.StatusBadRequest, schema.CodeInvalid, `Send the file as multipart/form-data in the field "file".`)
	}
	if p := files.CheckSize(fh.Size, limit); p != nil {
		return h.refuseFile(c, p.Status, p.Code, p.Message)
	}
	th := sha256.Sum256([]byte(token))
	known, ok, wait := h.admitUpload(site.ID, th, time.Now())
	if !known {
		return h.refuseFile(c, fiber.StatusForbidden, schema.CodeNotConnected,
			"Files are taken from a visitor whose chat window is connected: open the chat and send the file from it.")
	}
	if !ok {
		return h.refuseLater(c, schema.CodeRateLimited, "You are sending files too fast; wait", wait)
	}
	ip := h.IPs.IP(c)
	if ok, wait := h.Brakes.Upload(site.ID, ip); !ok {
		return h.refuseLater(c, schema.CodeRateLimited, "You are sending files too fast; wait", wait)
	}
	if ok, wait := site.Brake.AdmitMessage(); !ok {
		return h.refuseLater(c, schema.CodeBraked, "This site is receiving too many messages right now; wait", wait)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 10*time.Second)
	defer cancel()
	if h.Intake == nil {
		return h.refuseFile(c, fiber.StatusServiceUnavailable, schema.CodeUnavailable, "This chat keeps no attachments.")
	}
	row, p := h.Intake.Take(ctx, site.ID, limit, fh, th[:])
	if p != nil {
		return h.refuseFile(c, p.Status, p.Code, p.Message)
	}
	h.Metrics.FilesStored.Inc()
	return c.Status(fiber.StatusCreated).JSON(row.Wire())
}

func (h *Handler) refuseFile(c *fiber.Ctx, status int, code, msg string) error {
	h.Metrics.FrameErrors.WithLabelValues(code).Inc()
	return refuse(c, status, code, msg)
}

func (h *Handler) refuseLater(c *fiber.Ctx, code, sentence string, wait time.Duration) error {
	secs := int(wait/time.Second) + 1
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	return h.refuseFile(c, fiber.StatusTooManyRequests, code, sentence+" "+strconv.Itoa(secs)+" seconds and send it again.")
}

// file checks the upload a message frame names: the site's, uploaded with this socket's
// token. It answers the frame itself when the file is refused.
func (s *session) file(clientID, key string) (*store.File, bool) {
	if !files.ValidKey(key) {
		s.fail(clientID, schema.CodeInvalid, "file must be the id the upload answered with.", 0)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, found, err := s.h.Store.FileByKey(ctx, key)
	if err != nil {
		s.h.Log.Error("attachment lookup", "err", err)
		s.fail(clientID, schema.CodeUnavailable, "The server cannot take the message now; send it again.", 1000)
		return nil, false
	}
	if !found || f.SiteID != s.site.ID || string(f.TokenHash) != string(s.tokenHash) {
		s.fail(clientID, schema.CodeInvalid, "No upload of yours has this id: upload the file again.", 0)
		return nil, false
	}
	// Sent before: a resend of the same frame (its client id makes it one message), or a
	// second message showing the same file.
	return &f, true
}
