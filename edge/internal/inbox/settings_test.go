package inbox

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/files"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// settingsApp is the inbox API on a real SQLite store with one site, its operator and an API
// token of theirs.
func settingsApp(t *testing.T, allowPrivate bool) (app *fiber.App, st *store.Store, site *store.Site, token string) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{Readers: 1})
	testkit.NoErr(t, err)
	t.Cleanup(func() { st.Close() })
	site = &store.Site{Name: "Shop", Origins: []string{"https://shop.example"}}
	token = TokenPrefix + randomToken(24)
	ctx := context.Background()
	if err := st.Write(ctx, func(tx *store.Tx) error {
		if err := tx.AddSite(site); err != nil {
			return err
		}
		op, err := tx.AddOperator("ann@shop.example", "Ann", "correct horse", []string{site.Key})
		if err != nil {
			return err
		}
		_, err = tx.AddAPIToken(op.ID, hashToken(token), "test")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	app = fiber.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := files.Dir{Root: t.TempDir()}
	(&Handler{Store: st, Sites: sites.New([]*store.Site{site}, brakes.New(brakes.Defaults(), nil)), Hub: NewHub(),
		Log: log, AllowPrivateTargets: allowPrivate, Files: dir, Intake: &files.Intake{Store: st, Dir: dir, Reserve: -1, Log: log}}).Register(app)
	return app, st, site, token
}

// addMember adds an operator to the site in role, with an API token of theirs.
func addMember(t *testing.T, st *store.Store, site *store.Site, email string, role store.Role) (*store.Operator, string) {
	t.Helper()
	token := TokenPrefix + randomToken(24)
	var op *store.Operator
	testkit.NoErr(t, st.Write(context.Background(), func(tx *store.Tx) (err error) {
		if op, err = tx.AddOperator(email, strings.Split(email, "@")[0], "correct horse", nil); err != nil {
			return err
		}
		if _, err = tx.AddMember(site.Key, op.ID, role); err != nil {
			return err
		}
		_, err = tx.AddAPIToken(op.ID, hashToken(token), "test")
		return err
	}))
	return op, token
}

// apiCall sends a request with an API token to the inbox API under test, decodes the JSON
// answer into out (unless nil) and returns the status.
func apiCall(t *testing.T, app *fiber.App, token, method, path, body string, out any) int {
	t.Helper()
	resp := apiRequest(t, app, token, method, path, strings.NewReader(body))
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// apiRequest sends a JSON request with the operator's API token to the inbox API under test.
func apiRequest(t *testing.T, app *fiber.App, token, method, path string, body io.Reader) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := app.Test(req, 10_000)
	testkit.NoErr(t, err)
	return resp
}

// TestSettingsRefuseInternalTargets: the inbox API refuses a webhook or Discord URL the
// worker would refuse, with a 400 that names the field and shows a valid URL, never the URL
// given (a Discord webhook's path is its token); nothing is stored.
func TestSettingsRefuseInternalTargets(t *testing.T) {
	const secret = "T0KEN-s3cr3t"
	for _, tc := range []struct {
		name    string
		body    map[string]string
		private bool
		want    string // start of the message; "" for accepted
	}{
		{"webhook https", map[string]string{"webhook_url": "https://hooks.shop.example/in", "webhook_secret": "whsec_c2VjcmV0"}, false, ""},
		{"webhook nats port", map[string]string{"webhook_url": "http://127.0.0.1:4222/", "webhook_secret": "s"}, false, "webhook_url must start with https://, for example https://example.com/hooks/spookat."},
		{"webhook loopback", map[string]string{"webhook_url": "https://127.0.0.1:8080/v1/api?k=" + secret, "webhook_secret": "s"}, false, "webhook_url must not point at a non-public address (address 127.0.0.1 is loopback), for example"},
		{"webhook metadata", map[string]string{"webhook_url": "https://169.254.169.254/latest/meta-data/", "webhook_secret": "s"}, false, "webhook_url must not point at a non-public address (address 169.254.169.254 is cloud metadata)"},
		{"webhook metadata v6", map[string]string{"webhook_url": "https://[fd00:ec2::254]/", "webhook_secret": "s"}, false, "webhook_url must not point at a non-public address (address fd00:ec2::254 is cloud metadata)"},
		{"webhook metadata name", map[string]string{"webhook_url": "https://metadata.google.internal/", "webhook_secret": "s"}, false, "webhook_url must not point at cloud metadata"},
		{"webhook private", map[string]string{"webhook_url": "https://10.0.0.5/hook", "webhook_secret": "s"}, false, "webhook_url must not point at a non-public address (address 10.0.0.5 is private)"},
		{"webhook decimal", map[string]string{"webhook_url": "https://2130706433/", "webhook_secret": "s"}, false, "webhook_url must write an IPv4 address"},
		{"webhook userinfo", map[string]string{"webhook_url": "https://a:" + secret + "@hooks.shop.example/", "webhook_secret": "s"}, false, "webhook_url must not hold a user name or password"},
		{"webhook lab", map[string]string{"webhook_url": "http://127.0.0.1:9/in", "webhook_secret": "s"}, true, ""},
		{"discord", map[string]string{"discord_webhook": "https://discord.com/api/webhooks/1234/" + secret}, false, ""},
		{"discord other host", map[string]string{"discord_webhook": "https://hooks.shop.example/api/webhooks/1234/" + secret}, false, "discord_webhook must be a Discord webhook on discord.com, for example https://discord.com/api/webhooks/"},
		{"discord nats port", map[string]string{"discord_webhook": "https://127.0.0.1:4222/api/webhooks/1234/" + secret}, false, "discord_webhook must not point at a non-public address (address 127.0.0.1 is loopback)"},
		{"discord http", map[string]string{"discord_webhook": "http://discord.com/api/webhooks/1234/" + secret}, false, "discord_webhook must start with https://"},
		{"discord path", map[string]string{"discord_webhook": "https://discord.com/api/users/@me?" + secret}, false, "discord_webhook must be a Discord webhook URL"},
		{"discord lab mock", map[string]string{"discord_webhook": "http://127.0.0.1:9999/api/webhooks/1/" + secret}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, st, site, token := settingsApp(t, tc.private)
			body, _ := json.Marshal(tc.body)
			req := httptest.NewRequest(http.MethodPut, "/v1/api/sites/"+site.Key+"/settings", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := app.Test(req, 10_000)
			testkit.NoErr(t, err)
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			row, err := st.SiteByID(ctx, site.ID)
			testkit.NoErr(t, err)
			stored := row.WebhookURL + row.DiscordWebhook
			if tc.want == "" {
				if resp.StatusCode != http.StatusOK || stored == "" {
					t.Fatalf("status %d %s, stored %q: want it accepted", resp.StatusCode, raw, stored)
				}
				return
			}
			var e schema.HTTPError
			if err := json.Unmarshal(raw, &e); err != nil || resp.StatusCode != http.StatusBadRequest || e.Code != "invalid" {
				t.Fatalf("status %d %s, want 400 invalid", resp.StatusCode, raw)
			}
			if !strings.HasPrefix(e.Message, tc.want) {
				t.Errorf("message %q, want it to start %q", e.Message, tc.want)
			}
			if strings.Contains(e.Message, secret) {
				t.Errorf("message %q repeats the URL", e.Message)
			}
			if stored != "" {
				t.Errorf("refused URL stored: %q", stored)
			}
		})
	}
}

// TestWidgetSettings: the chat window's settings are stored whole and shown back; a wrong
// field is refused with a 400 sentence naming it, and the stored ones stay.
func TestWidgetSettings(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	put := func(body string) (int, schema.HTTPError) {
		resp := apiRequest(t, app, token, http.MethodPut, "/v1/api/sites/"+site.Key+"/settings", strings.NewReader(body))
		defer resp.Body.Close()
		var e schema.HTTPError
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	if st, e := put(`{"widget":{"title":" Shop help ","accent":"#112233","hours":"mon-fri 09:00-17:00","time_zone":"Europe/Paris"}}`); st != http.StatusOK {
		t.Fatalf("valid settings: %d %+v", st, e)
	}
	for _, c := range []struct{ body, names string }{
		{`{"widget":{"accent":"red"}}`, "accent"},
		{`{"widget":{"hours":"weekdays 9-5"}}`, "hours"},
		{`{"widget":{"time_zone":"Nowhere/Town"}}`, "time_zone"},
		{`{"widget":{"position":"middle"}}`, "position"},
		{`{"slack_token":"xoxb-…","slack_channel":"C0123ABCD"}`, "placeholder"},
		{`{"notify_email":"not-an-email"}`, "notify_email"},
		{`{"notify_email":"ann@"}`, "not an email address"},
	} {
		t.Run(c.names, func(t *testing.T) {
			code, e := put(c.body)
			if code != http.StatusBadRequest || e.Code != "invalid" || !strings.Contains(e.Message, c.names) {
				t.Fatalf("%s: %d %+v, want 400 naming %s", c.body, code, e, c.names)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	row, err := st.SiteByID(ctx, site.ID)
	testkit.NoErr(t, err)
	if w := row.Widget; w.Title != "Shop help" || w.Accent != "#112233" || w.TimeZone != "Europe/Paris" || w.Hours != "mon-fri 09:00-17:00" {
		t.Fatalf("stored widget settings %+v", w)
	}
}
