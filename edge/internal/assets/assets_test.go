package assets

import (
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"spookat/schema/testkit"
)

func TestLauncherBudget(t *testing.T) {
	s := New()
	t.Logf("widget.js: %d bytes, %d gzipped; chat.js %d gzipped; app.js %d gzipped",
		len(s.Launcher.Body), len(s.Launcher.Gzip), len(s.Chat.Gzip), len(s.AppJS.Gzip))
	if len(s.Launcher.Gzip) > MaxLauncherGzip {
		t.Fatalf("widget.js is %d bytes gzipped, over the %d budget", len(s.Launcher.Gzip), MaxLauncherGzip)
	}
	if strings.Contains(string(s.Launcher.Body), "__V__") {
		t.Fatal("widget.js still holds the chat version placeholder")
	}
}

// Text from the network is set with textContent; innerHTML appears only once, with a
// constant string, in the launcher.
func TestNoHTMLFromText(t *testing.T) {
	s := New()
	for name, f := range map[string]*File{"chat.js": s.Chat, "app.js": s.AppJS} {
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(string(f.Body), bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
	uses := regexp.MustCompile(`innerHTML\s*=\s*'[^']*'\s*;`).FindAllString(string(s.Launcher.Body), -1)
	if n := strings.Count(string(s.Launcher.Body), "innerHTML"); n != 1 || len(uses) != 1 {
		t.Fatalf("widget.js: innerHTML must be set once, from one constant string (found %d uses, %d constant)", n, len(uses))
	}
}

// /demo says on the page, and in its status, that a key is unknown.
func TestDemoPage(t *testing.T) {
	app := fiber.New()
	New().KnownSites(func(key string) bool { return key == "st_known" }).Register(app)
	for _, tc := range []struct {
		name, query string
		status      int
		want, not   []string
	}{
		{"known key", "?site=st_known", 200, []string{`data-site="st_known"`}, []string{"No site has the key"}},
		{"unknown key", "?site=st_nope", 404, []string{"No site has the key <code>st_nope</code>", `data-site="st_nope"`}, nil},
		{"no key", "", 400, []string{"Give the site key"}, []string{"<script"}},
		{"bad key", "?site=%3Cb%3E", 400, []string{"Give the site key"}, []string{"<b>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := app.Test(httptest.NewRequest("GET", "/demo"+tc.query, nil), -1)
			testkit.NoErr(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("page lacks %q:\n%s", w, b)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(string(b), n) {
					t.Errorf("page holds %q:\n%s", n, b)
				}
			}
		})
	}
}
