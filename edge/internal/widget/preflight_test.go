package widget

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

type answer struct {
	status     int
	body       schema.HTTPError
	retryAfter string
	cors       string
}

func call(t *testing.T, app *fiber.App, req *http.Request) answer {
	t.Helper()
	resp, err := app.Test(req, -1)
	testkit.NoErr(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get(fiber.HeaderRetryAfter),
		cors: resp.Header.Get(fiber.HeaderAccessControlAllowOrigin)}
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a.body); err != nil {
			t.Fatalf("body %q is not an HTTPError: %v", b, err)
		}
	}
	return a
}

func probe(key, origin string) *http.Request {
	r := httptest.NewRequest("POST", "/v1/widget/check?site="+key, nil)
	if origin != "" {
		r.Header.Set(fiber.HeaderOrigin, origin)
	}
	return r
}

func handshake(key, origin string) *http.Request {
	r := httptest.NewRequest("GET", "/v1/widget/ws?site="+key, nil)
	r.Header.Set(fiber.HeaderOrigin, origin)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	return r
}

// The preflight gives the page the answer the websocket handshake gives but a browser's
// WebSocket cannot read, word for word, and shares the handshake's per-(site, IP) budget.
func TestPreflight(t *testing.T) {
	br := brakes.New(brakes.Config{IPSocketRate: 0.001, IPSocketBurst: 2}, brakes.Wall())
	h := &Handler{
		Sites:   sites.New([]*store.Site{{ID: 1, Key: "st_shop", Name: "Shop", Origins: []string{"https://shop.example"}}}, br),
		Metrics: metrics.New(),
		Brakes:  br,
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	app := fiber.New()
	h.Register(app)

	t.Run("refusals match the handshake's", func(t *testing.T) {
		for _, tc := range []struct {
			name, key, origin string
			status            int
			code              string
		}{
			{"unknown key", "st_nope", "https://shop.example", 404, "unknown_site"},
			{"no key", "", "https://shop.example", 404, "unknown_site"},
			{"other origin", "st_shop", "https://evil.example", 403, "origin_not_allowed"},
			{"no origin", "st_shop", "", 403, "origin_not_allowed"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := call(t, app, probe(tc.key, tc.origin))
				if p.status != tc.status || p.body.Code != tc.code || p.body.Message == "" {
					t.Fatalf("preflight: %+v, want %d %s with a message", p, tc.status, tc.code)
				}
				if p.cors != "*" {
					t.Fatalf("preflight: Access-Control-Allow-Origin %q, want * (the page must read the refusal)", p.cors)
				}
				ws := call(t, app, handshake(tc.key, tc.origin))
				if ws.status != p.status || ws.body != p.body {
					t.Fatalf("handshake answers %d %+v, preflight %d %+v: they must say the same", ws.status, ws.body, p.status, p.body)
				}
			})
		}
	})

	t.Run("allowed, then braked with the handshake's budget", func(t *testing.T) {
		for i := range 2 {
			if p := call(t, app, probe("st_shop", "https://shop.example")); p.status != fiber.StatusNoContent {
				t.Fatalf("preflight %d within the burst: %+v, want 204", i+1, p)
			}
		}
		p := call(t, app, probe("st_shop", "https://shop.example"))
		if p.status != fiber.StatusTooManyRequests || p.body.Code != schema.CodeRateLimited || p.retryAfter == "" {
			t.Fatalf("preflight past the burst: %+v, want 429 rate_limited with Retry-After", p)
		}
		// The probes used the sockets' tokens: the handshake is refused too.
		ws := call(t, app, handshake("st_shop", "https://shop.example"))
		if ws.status != fiber.StatusTooManyRequests || ws.body.Code != schema.CodeRateLimited {
			t.Fatalf("handshake after the probes: %+v, want 429 rate_limited", ws)
		}
	})
}
