package files

import (
	"net/url"

	"github.com/gofiber/fiber/v2"

	"spookat/schema"
)

// Serve answers with the file: an image inline with its sniffed type, anything else as a
// download of application/octet-stream. nosniff and a sandbox CSP go with both, so that
// nothing served from here runs in the edge's origin, whatever the bytes are.
func (d Dir) Serve(c *fiber.Ctx, f schema.File) error {
	fh, err := d.Open(f.ID)
	if err != nil {
		return c.Status(fiber.StatusGone).JSON(schema.HTTPError{Code: "file_missing",
			Message: "This file is named in the conversation but is no longer on the server."})
	}
	disposition, typ := "attachment", "application/octet-stream"
	if f.Image() {
		disposition, typ = "inline", f.Type
	}
	c.Set(fiber.HeaderContentType, typ)
	c.Set(fiber.HeaderContentDisposition, disposition+"; filename*=UTF-8''"+url.PathEscape(f.Name))
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; sandbox")
	c.Set(fiber.HeaderCacheControl, "private, max-age=86400")
	return c.SendStream(fh, int(f.Size))
}
