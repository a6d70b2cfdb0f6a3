package schema

import (
	"strings"
	"testing"

	"spookat/schema/testkit"
)

func TestCheckPage(t *testing.T) {
	long := "https://shop.test/" + strings.Repeat("a", MaxPageURLLen)
	for _, tc := range []struct {
		name                       string
		origin, url, ref, lang, tz string
		want                       string // the sentence's start; "" accepted
		wantURL, wantRef, wantTZ   string // wantTZ "-": none kept
	}{
		{name: "a page", origin: "https://shop.test", url: "https://shop.test/pricing?plan=pro#faq", ref: "https://www.google.com/",
			lang: "de-DE", tz: "Europe/Berlin", wantURL: "https://shop.test/pricing?plan=pro#faq", wantRef: "https://www.google.com/"},
		{name: "no origin header", url: "http://anywhere.test/", wantURL: "http://anywhere.test/"},
		{name: "origin differs only in case", origin: "https://Shop.test", url: "https://shop.test/", wantURL: "https://shop.test/"},
		{name: "credentials dropped", url: "https://ada:secret@shop.test/a", ref: "https://bob:pw@ref.test/x",
			wantURL: "https://shop.test/a", wantRef: "https://ref.test/x"},
		{name: "another origin", origin: "https://shop.test", url: "https://evil.test/", want: "url must be a page of the origin"},
		{name: "another port", origin: "https://shop.test", url: "https://shop.test:8443/", want: "url must be a page of the origin"},
		{name: "empty url", want: "url must be the page's http or https address"},
		{name: "javascript url", url: "javascript:alert(1)", want: "url must be the page's"},
		{name: "relative url", url: "/pricing", want: "url must be the page's"},
		{name: "too long", url: long, want: "url must be the page's"},
		{name: "control character", url: "https://shop.test/\x01", want: "url must be the page's"},
		{name: "bad referrer", url: "https://shop.test/", ref: "file:///etc/passwd", want: "referrer must be"},
		{name: "bad language", url: "https://shop.test/", lang: "de_DE;q=1", want: "language must be"},
		{name: "zone unknown here is left out", url: "https://shop.test/", tz: "Mars/Olympus", wantURL: "https://shop.test/", wantTZ: "-"},
		{name: "zone with dots", url: "https://shop.test/", tz: "../../etc/passwd", want: "time_zone must be"},
		{name: "Local is no zone", url: "https://shop.test/", tz: "Local", wantURL: "https://shop.test/", wantTZ: "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CheckPage(tc.origin, tc.url, "Title", tc.ref, tc.lang, tc.tz)
			if tc.want != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				return
			}
			testkit.NoErr(t, err)
			tz := tc.tz
			if tc.wantTZ == "-" {
				tz = ""
			}
			if c.URL != tc.wantURL || c.Referrer != tc.wantRef || c.Language != tc.lang || c.TimeZone != tz {
				t.Fatalf("%+v", c)
			}
		})
	}
	t.Run("long title cut", func(t *testing.T) {
		c, err := CheckPage("", "https://shop.test/", " "+strings.Repeat("é", 300)+"\x00 ", "", "", "")
		if err != nil || c.Title != strings.Repeat("é", MaxPageTitle) {
			t.Fatalf("%q %v", c.Title, err)
		}
	})
}

func TestBrowser(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36":                          "Chrome 131 on macOS",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86":              "Edge 131 on Windows",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0":                                                               "Firefox 133 on Windows",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1":        "Safari 17 on iOS",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1": "Chrome 131 on iOS",
		"Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36":     "Samsung Internet 26 on Android",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36":                                  "Headless Chrome 131 on Linux",
		"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36":                                 "Chrome 131 on ChromeOS",
		"curl/8.5.0": "",
		"":           "",
	} {
		if got := Browser(ua); got != want {
			t.Errorf("Browser(%q) = %q, want %q", ua, got, want)
		}
	}
}
