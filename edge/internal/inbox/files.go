package inbox

import (
	"bytes"
	"context"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/files"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// upload answers POST /v1/api/conversations/{id}/files: an operator's attachment for a reply
// in the conversation (multipart/form-data, field "file"), taken as a visitor's is (the
// site's largest file, its quota, the disk's reserve, the type sniffed from the content:
// files.Intake). The answer is its id, which the reply then names ("file"); only this
// operator can send it, and only in this site.
func (h *Handler) upload(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	site := h.Sites.ByID(cv.SiteID)
	if site == nil {
		return fail(c, fiber.StatusNotFound, "not_found", "No such site.")
	}
	limit := site.Widget.FileLimit()
	if limit == 0 {
		return fail(c, fiber.StatusForbidden, schema.CodeFileRefused,
			"This site takes no attachments: an owner can allow them in Settings (Chat window, largest attachment).")
	}
	fh, err := c.FormFile("file")
	if err != nil {
		return fail(c, fiber.StatusBadRequest, schema.CodeInvalid, `Send the file as multipart/form-data in the field "file".`)
	}
	if p := files.CheckSize(fh.Size, limit); p != nil {
		return fail(c, p.Status, p.Code, p.Message)
	}
	if h.Intake == nil {
		return fail(c, fiber.StatusServiceUnavailable, schema.CodeUnavailable, "This edge keeps no attachments.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	row, p := h.Intake.Take(ctx, cv.SiteID, limit, fh, files.OperatorUploader(current(c).op.ID))
	if p != nil {
		return fail(c, p.Status, p.Code, p.Message)
	}
	return c.Status(fiber.StatusCreated).JSON(row.Wire())
}

// replyFile finds the upload a reply names: this operator's, in the conversation's site, not
// shown in another conversation. ok is false when the answer is already written.
func (h *Handler) replyFile(c *fiber.Ctx, ctx context.Context, cv *store.ConversationSummary, key string) (*store.File, bool, error) {
	refused := func() (*store.File, bool, error) {
		return nil, false, fail(c, fiber.StatusBadRequest, schema.CodeInvalid, "No upload of yours has this id in this conversation: upload the file again.")
	}
	if !files.ValidKey(key) {
		return refused()
	}
	f, found, err := h.Store.FileByKey(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if !found || f.SiteID != cv.SiteID || !bytes.Equal(f.TokenHash, files.OperatorUploader(current(c).op.ID)) ||
		(f.ConversationID != 0 && f.ConversationID != cv.ID) {
		return refused()
	}
	return &f, true, nil
}

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
