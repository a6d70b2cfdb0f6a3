package server

import (
	"bytes"
	"cmp"
	"errors"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"spookat/edge/internal/assets"
	"spookat/edge/internal/files"
	"spookat/edge/internal/inbox"
	"spookat/edge/internal/paddle"
	"spookat/edge/internal/slackevents"
	"spookat/edge/internal/sockets"
	"spookat/edge/internal/widget"
	"spookat/schema"
)

// routes is the public HTTP server: health, the widget and its websockets, the chat window and
// inbox assets, the inbox API and its websockets, attachments, Slack's events.
func (e *Edge) routes() *fiber.App {
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ReadTimeout:           cmp.Or(e.cfg.RequestTimeout, DefaultRequestTimeout),
		IdleTimeout:           120 * time.Second,
		BodyLimit:             1 << 20,
		// Frees a connection's 4 KiB read buffer once a request is read when nothing else is
		// buffered, so a websocket (hijacked) keeps none of it for its whole life.
		ReduceMemoryUsage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			code := fiber.StatusInternalServerError
			var fe *fiber.Error
			if errors.As(err, &fe) {
				code = fe.Code
			}
			if code == fiber.StatusRequestEntityTooLarge { // read by fasthttp before any handler
				return c.Status(code).JSON(schema.HTTPError{Code: schema.CodeTooLarge,
					Message: "The request body is larger than this endpoint takes (1 MB; an attachment, the site's limit)."})
			}
			return c.Status(code).JSON(schema.HTTPError{Code: "error", Message: err.Error()})
		},
	})
	// An attachment's request may be as large as the largest a site may take; every other
	// body stays under BodyLimit.
	app.Server().HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		if h.IsPost() && bytes.HasPrefix(h.RequestURI(), []byte(widget.UploadPath)) {
			return fasthttp.RequestConfig{MaxRequestBodySize: schema.MaxFileMaxMB<<20 + 64<<10, ReadTimeout: UploadTimeout}
		}
		return fasthttp.RequestConfig{}
	}
	// A hijacked connection (a websocket) is its handler's to close: a widget socket's
	// handler returns once the poller has it, which gives fasthttp's handshake context and
	// buffers back, and the socket stays open.
	app.Server().KeepHijackedConns = true
	// A connection's first response, its upgrade to a websocket or its close ends its setup:
	// its slot of the listener's setup bound goes to the next one.
	app.Server().ConnState = func(c net.Conn, st fasthttp.ConnState) {
		if st == fasthttp.StateIdle || st == fasthttp.StateHijacked || st == fasthttp.StateClosed {
			sockets.SetupDone(c)
		}
	}
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/readyz", func(c *fiber.Ctx) error {
		switch {
		case !e.serving.Load():
			return c.Status(fiber.StatusServiceUnavailable).SendString("starting")
		case e.draining.Load():
			return c.Status(fiber.StatusServiceUnavailable).SendString("stopping")
		case !e.nats.Ready():
			return c.Status(fiber.StatusServiceUnavailable).SendString("NATS is not connected")
		case !e.store.Running():
			return c.Status(fiber.StatusServiceUnavailable).SendString("the SQLite writer is not running")
		}
		return c.SendString("ready")
	})
	warnQuotas(e.sites, e.files, cmp.Or(e.cfg.FileQuota, files.DefaultQuota), e.log)
	e.widgetHandler().Register(app)
	assets.New().KnownSites(func(key string) bool { return e.sites.ByKey(key) != nil }).Register(app) // widget.js, chat window, /app/, /demo
	ih := &inbox.Handler{Store: e.store, Sites: e.sites, Hub: e.operators, Visitors: e.visitors, Log: e.log,
		AllowPrivateTargets: e.workerCfg.AllowPrivateTargets, IPs: e.ips, Metrics: e.metrics, Files: e.files,
		PublicURL: e.cfg.PublicURL, PublishJob: e.publishJob, Intake: e.intake()}
	if e.plans != nil {
		ih.Plans = e.plans
		// Billing: Paddle's notifications move sites' plans. Without -plans the route does
		// not exist (404).
		(&paddle.Handler{Store: e.store, Sites: e.sites, Book: e.plans, Log: e.log, Clock: e.cfg.Clock}).Register(app)
	}
	ih.Register(app)
	(&files.Links{Store: e.store, Signer: e.signer, Dir: e.files, Log: e.log}).Register(app)
	e.slackEvents = &slackevents.Handler{Store: e.store, Sites: e.sites, Log: e.log, PublishJob: e.publishJob}
	e.slackEvents.Register(app)
	return app
}

// intake takes attachments, within each site's plan's storage when the edge has plans.
func (e *Edge) intake() *files.Intake {
	in := &files.Intake{Store: e.store, Dir: e.files, Quota: e.cfg.FileQuota, Reserve: e.cfg.DiskReserve, Log: e.log}
	if e.plans != nil {
		in.SiteQuota = e.plans.Quota
	}
	return in
}

// widgetHandler is the visitors' side: the widget's HTTP routes and chat sockets, and the
// presence its open windows hear. Made once, by the first stage that needs it.
func (e *Edge) widgetHandler() *widget.Handler {
	if e.widget == nil {
		e.widget = &widget.Handler{Store: e.store, Sites: e.sites, Hub: e.visitors, Metrics: e.metrics, Brakes: e.brakes, IPs: e.ips, Log: e.log,
			Pace: &widget.Pacer{Rate: e.cfg.SocketRate}, Operators: e.operators, Online: e.presence.Online, PresenceChanges: e.presenceChanges,
			FirstFrame: e.cfg.FirstFrame, ReadEach: e.cfg.WidgetReadEach, Intake: e.intake()}
		if e.plans != nil {
			e.widget.Plans = e.plans
		}
	}
	return e.widget
}
