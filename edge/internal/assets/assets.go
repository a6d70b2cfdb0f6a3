// Package assets serves what browsers load from the edge, embedded in the binary: the widget
// launcher (/widget.js), the chat window it loads on intent (/v1/widget/chat.js), the operator
// inbox (/app/) and the demo page (/demo?site=KEY). Files are gzipped once at start and served
// from memory.
package assets

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html"
	"strings"

	"github.com/gofiber/fiber/v2"
)

//go:embed static
var files embed.FS

// MaxLauncherGzip is the budget of widget.js, gzipped (checked by the tests).
const MaxLauncherGzip = 2048

// File is one served asset.
type File struct {
	Body []byte
	Gzip []byte
	Type string
}

func load(name, typ string, replace ...string) *File {
	b, err := files.ReadFile("static/" + name)
	if err != nil {
		panic(err)
	}
	if len(replace) > 0 {
		b = []byte(strings.NewReplacer(replace...).Replace(string(b)))
	}
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	w.Write(b)
	w.Close()
	return &File{Body: b, Gzip: gz.Bytes(), Type: typ}
}

func version(names ...string) string {
	h := sha256.New()
	for _, n := range names {
		b, err := files.ReadFile("static/" + n)
		if err != nil {
			panic(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Set is every asset, versioned by content so that the versioned ones can be cached forever.
type Set struct {
	Launcher *File // widget.js
	Chat     *File
	AppHTML  *File
	AppJS    *File
	AppCSS   *File
	demo     string
	known    func(key string) bool
}

// KnownSites tells the demo page which site keys exist, so that it can answer 404 for the
// others; without it every well-formed key gets the page.
func (s *Set) KnownSites(known func(key string) bool) *Set {
	s.known = known
	return s
}

// New loads and compresses the assets.
func New() *Set {
	chatV := version("chat.js", "when.js")
	appV := version("app.js", "app.css", "when.js")
	when, err := files.ReadFile("static/when.js")
	if err != nil {
		panic(err)
	}
	shared := []string{"/*@when.js*/", string(when)}
	demo, err := files.ReadFile("static/demo.html")
	if err != nil {
		panic(err)
	}
	return &Set{
		Launcher: load("widget.js", "text/javascript; charset=utf-8", "__V__", chatV),
		Chat:     load("chat.js", "text/javascript; charset=utf-8", shared...),
		AppHTML:  load("app.html", "text/html; charset=utf-8", "{{V}}", appV),
		AppJS:    load("app.js", "text/javascript; charset=utf-8", shared...),
		AppCSS:   load("app.css", "text/css; charset=utf-8"),
		demo:     string(demo),
	}
}

const (
	cacheShort   = "public, max-age=300"                 // widget.js: the embed URL never changes
	cacheForever = "public, max-age=31536000, immutable" // versioned by ?v=<content hash>
	// The inbox runs only its own scripts and talks only to its own origin.
	appCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

func (f *File) serve(c *fiber.Ctx, cache string) error {
	c.Set(fiber.HeaderContentType, f.Type)
	c.Set(fiber.HeaderCacheControl, cache)
	c.Set(fiber.HeaderVary, fiber.HeaderAcceptEncoding)
	c.Set("X-Content-Type-Options", "nosniff")
	if strings.Contains(c.Get(fiber.HeaderAcceptEncoding), "gzip") {
		c.Set(fiber.HeaderContentEncoding, "gzip")
		return c.Send(f.Gzip)
	}
	return c.Send(f.Body)
}

// Register mounts the asset routes.
func (s *Set) Register(app *fiber.App) {
	app.Get("/widget.js", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
		return s.Launcher.serve(c, cacheShort)
	})
	app.Get("/v1/widget/chat.js", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
		return s.Chat.serve(c, cacheForever)
	})
	app.Get("/", func(c *fiber.Ctx) error { return c.Redirect("/app/", fiber.StatusFound) })
	app.Get("/app/", func(c *fiber.Ctx) error { // also /app: routing is not strict
		c.Set("Content-Security-Policy", appCSP)
		c.Set("X-Frame-Options", "DENY")
		c.Set("Referrer-Policy", "same-origin")
		return s.AppHTML.serve(c, "no-cache")
	})
	app.Get("/app/app.js", func(c *fiber.Ctx) error { return s.AppJS.serve(c, cacheForever) })
	app.Get("/app/app.css", func(c *fiber.Ctx) error { return s.AppCSS.serve(c, cacheForever) })
	app.Get("/demo", s.serveDemo)
}

// serveDemo is a page that embeds the widget of ?site=KEY, for trying it.
func (s *Set) serveDemo(c *fiber.Ctx) error {
	key := c.Query("site")
	if key == "" || len(key) > 64 || strings.IndexFunc(key, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) >= 0 {
		return c.Status(fiber.StatusBadRequest).SendString("Give the site key: /demo?site=<key> (`edge demo` prints it).")
	}
	base := c.Protocol() + "://" + c.Hostname()
	notice := ""
	if s.known != nil && !s.known(key) {
		// The widget stays on the page: it shows what a visitor would see with this key.
		c.Status(fiber.StatusNotFound)
		notice = `<p class="bad" role="alert">No site has the key <code>` + html.EscapeString(key) +
			`</code>: check it with <code>edge site list</code>. The chat button below shows what a visitor sees on a page with this key.</p>`
	}
	page := strings.NewReplacer("{{NOTICE}}", notice, "{{KEY}}", html.EscapeString(key), "{{BASE}}", html.EscapeString(base)).Replace(s.demo)
	c.Set(fiber.HeaderContentType, "text/html; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	return c.SendString(page)
}
