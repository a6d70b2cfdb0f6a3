package widget

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/schema"
)

// preflight answers POST /v1/widget/check?site=<key> with what the websocket handshake would
// answer: a browser's WebSocket sees only close 1006 when the upgrade is refused, so the chat
// window asks here after a socket fails to open, to learn whether to stop (unknown site,
// refused origin), wait (rate limited) or keep retrying (the server is up: the failure was the
// network's).
//
// It is a POST so that the browser sends Origin on same-origin pages too (it omits it on a
// same-origin GET), and a simple one (no body, no custom header) so that a cross-origin page
// asks without a CORS OPTIONS round trip. It takes a token from the same (site, IP) bucket as
// a new socket: probes and sockets share one budget, so the probe is no way around the brake.
func (h *Handler) preflight(c *fiber.Ctx) error {
	c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
	c.Set(fiber.HeaderAccessControlExposeHeaders, fiber.HeaderRetryAfter)
	c.Set(fiber.HeaderCacheControl, "no-store")
	site := h.Sites.ByKey(c.Query("site"))
	if site == nil {
		return refuse(c, fiber.StatusNotFound, "unknown_site", "No site has this key: check data-site in the embed snippet.")
	}
	if !site.AllowsOrigin(c.Get(fiber.HeaderOrigin)) {
		return refuse(c, fiber.StatusForbidden, "origin_not_allowed",
			"This page's origin is not in the site's allowed origins: add it in the site's settings.")
	}
	ip := h.IPs.IP(c)
	if ok, wait := h.Brakes.NewSocket(site.ID, ip); !ok {
		secs := int(wait/time.Second) + 1
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		h.Metrics.FrameErrors.WithLabelValues(schema.CodeRateLimited).Inc()
		return refuse(c, fiber.StatusTooManyRequests, schema.CodeRateLimited,
			"Too many new chat connections from your network to this site; try again in "+strconv.Itoa(secs)+" seconds.")
	}
	return c.SendStatus(fiber.StatusNoContent)
}
