package assets

import (
	"regexp"
	"strings"
	"testing"
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
