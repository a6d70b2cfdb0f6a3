package files

import (
	"context"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Links serves GET /v1/files/{id}?exp=…&sig=…: an attachment read with the signed link a
// visitor's frame, a Slack or Discord post, a webhook or an email carried. Without a valid,
// unexpired signature it is 404 (as for an id that does not exist).
type Links struct {
	Store  *store.Store
	Signer *Signer
	Dir    Dir
	Log    *slog.Logger
}

// Register mounts the route.
func (l *Links) Register(app *fiber.App) { app.Get("/v1/files/:key", l.serve) }

func (l *Links) serve(c *fiber.Ctx) error {
	key := c.Params("key")
	if !ValidKey(key) || !l.Signer.Check(key, c.Query("exp"), c.Query("sig"), time.Now()) {
		return c.Status(fiber.StatusNotFound).JSON(schema.HTTPError{Code: "not_found",
			Message: "This link is wrong or has expired: open the file from the conversation again."})
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 10*time.Second)
	defer cancel()
	f, found, err := l.Store.FileByKey(ctx, key)
	if err != nil {
		l.Log.Error("attachment lookup", "err", err)
		return c.Status(fiber.StatusServiceUnavailable).JSON(schema.HTTPError{Code: schema.CodeUnavailable,
			Message: "The file cannot be read now; try again shortly."})
	}
	if !found || f.MessageID == 0 {
		return c.Status(fiber.StatusNotFound).JSON(schema.HTTPError{Code: "not_found",
			Message: "This link is wrong or has expired: open the file from the conversation again."})
	}
	return l.Dir.Serve(c, *f.Wire())
}
