package slackevents

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// Handler tests of what is refused before anything is stored (the stored replies are
// covered by the browser test TestSlackReplyReachesVisitor).
func TestRefusals(t *testing.T) {
	list := []*store.Site{
		{ID: 1, Key: "st_a", Name: "a", SlackChannel: "CAAAAAAAA", SlackSigningSecret: "secret-a"},
		{ID: 2, Key: "st_b", Name: "b", SlackChannel: "CBBBBBBBB", SlackSigningSecret: "secret-b"},
		{ID: 3, Key: "st_c", Name: "c"}, // no Slack
	}
	h := &Handler{Sites: sites.New(list, brakes.New(brakes.Config{}, brakes.Wall())), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	app := fiber.New(fiber.Config{BodyLimit: 1 << 20})
	h.Register(app)

	verification := `{"type":"url_verification","challenge":"chal-1","token":"x"}`
	rateLimited := func(channel string) string {
		return `{"type":"app_rate_limited","event":{"channel":"` + channel + `"}}`
	}
	cases := []struct {
		name, query, body, secret string
		status                    int
		code                      string
	}{
		{"verification for a named site", "?site=st_a", verification, "secret-a", 200, ""},
		{"verification naming no site", "", verification, "secret-a", 400, "site_required"},
		{"verification for an unknown site", "?site=st_nope", verification, "secret-a", 401, "unauthorized"},
		{"verification for a site without Slack", "?site=st_c", verification, "", 401, "unauthorized"},
		{"another site's secret", "?site=st_a", verification, "secret-b", 401, "unauthorized"},
		{"event found by its channel", "", rateLimited("CBBBBBBBB"), "secret-b", 200, ""},
		{"event signed for another channel's site", "", rateLimited("CBBBBBBBB"), "secret-a", 401, "unauthorized"},
		{"event of an unknown channel", "", rateLimited("CZZZZZZZZ"), "secret-a", 401, "unauthorized"},
		{"unsigned", "?site=st_a", verification, "", 401, "unauthorized"},
		{"not JSON", "?site=st_a", "{", "secret-a", 401, "unauthorized"},
		{"over 256 KiB", "?site=st_a", `{"type":"url_verification","challenge":"` + strings.Repeat("x", MaxBody) + `"}`, "secret-a", 413, schema.CodeTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/v1/integrations/slack/events"+c.query, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			stamp := strconv.FormatInt(time.Now().Unix(), 10)
			req.Header.Set("X-Slack-Request-Timestamp", stamp)
			if c.secret != "" {
				m := hmac.New(sha256.New, []byte(c.secret))
				fmt.Fprintf(m, "v0:%s:%s", stamp, c.body)
				req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
			}
			resp, err := app.Test(req, 5000)
			testkit.NoErr(t, err)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.code == "" {
				return
			}
			var e schema.HTTPError
			if json.Unmarshal(body, &e) != nil || e.Code != c.code || len(e.Message) < 20 {
				t.Fatalf("body %s, want code %s and a sentence", body, c.code)
			}
		})
	}
}
