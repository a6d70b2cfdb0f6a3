package schema

import (
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// VisitorContext is what the widget reports of the page a visitor is on (a page frame) and
// what the edge adds from the socket's handshake (the browser). The visitor's latest is
// stored on the visitor; the one the conversation started with, on the conversation. The
// visitor's IP address is not part of it: the brakes use it and nothing stores it.
type VisitorContext struct {
	URL      string `json:"url"`
	Title    string `json:"title,omitempty"`
	Referrer string `json:"referrer,omitempty"`
	Language string `json:"language,omitempty"`  // the browser's, e.g. de-DE
	TimeZone string `json:"time_zone,omitempty"` // IANA, e.g. Europe/Berlin
	// UserAgent is the handshake's User-Agent header; Browser is its short reading
	// ("Chrome 131 on macOS"), for people.
	UserAgent string `json:"user_agent,omitempty"`
	Browser   string `json:"browser,omitempty"`
	At        int64  `json:"at"` // Unix ms, when the page was reported
}

// Bounds of a page frame's fields.
const (
	MaxPageURLLen   = 2048
	MaxPageTitle    = 200 // runes; a longer title is cut
	MaxUserAgentLen = 512 // bytes; a longer header is cut
)

// PageError is a refused page frame's sentence.
type PageError string

func (e PageError) Error() string { return string(e) }

// CheckPage reads a page frame's fields into a context. origin is the socket's Origin header
// ("" when the client sent none): a page of another origin is refused, as the socket itself
// would have been. The URL loses any user name and password; a long title is cut.
func CheckPage(origin, pageURL, title, referrer, language, timeZone string) (VisitorContext, error) {
	u, ok := httpURL(pageURL)
	if !ok {
		return VisitorContext{}, PageError("url must be the page's http or https address, at most 2,048 characters.")
	}
	if origin != "" && !strings.EqualFold(u.Scheme+"://"+u.Host, origin) {
		return VisitorContext{}, PageError("url must be a page of the origin this socket was opened from.")
	}
	u.User = nil
	if referrer != "" {
		r, ok := httpURL(referrer)
		if !ok {
			return VisitorContext{}, PageError("referrer must be empty or an http or https address, at most 2,048 characters.")
		}
		r.User = nil
		referrer = r.String()
	}
	if !validLanguage(language) {
		return VisitorContext{}, PageError("language must be a language tag such as en-US (letters, digits and '-', at most 35).")
	}
	if timeZone != "" && !zoneName(timeZone) {
		return VisitorContext{}, PageError("time_zone must be an IANA time zone name such as Europe/Berlin.")
	}
	if !KnownTimeZone(timeZone) {
		timeZone = "" // well formed, and newer than this server's zone database: left out
	}
	title = strings.TrimSpace(CleanText(title))
	if utf8.RuneCountInString(title) > MaxPageTitle {
		title = string([]rune(title)[:MaxPageTitle])
	}
	return VisitorContext{URL: u.String(), Title: title, Referrer: referrer, Language: language, TimeZone: timeZone}, nil
}

// Same reports whether two contexts name the same page, as a person would see it.
func (c *VisitorContext) Same(o *VisitorContext) bool {
	return c.URL == o.URL && c.Title == o.Title && c.Referrer == o.Referrer && c.Language == o.Language &&
		c.TimeZone == o.TimeZone && c.UserAgent == o.UserAgent
}

func httpURL(s string) (*url.URL, bool) {
	if s == "" || len(s) > MaxPageURLLen || HasControl(s) {
		return nil, false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

func validLanguage(s string) bool {
	if len(s) > 35 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// zones remembers the time zone names checked: the zone database is read from disk once per
// name, and there are a few hundred names.
var zones sync.Map // known name -> struct{}

// zoneName reports whether name is written as a zone database name is (Area/City_Name).
func zoneName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// KnownTimeZone reports whether name is a time zone of the zone database.
func KnownTimeZone(name string) bool {
	if !zoneName(name) {
		return false
	}
	if _, seen := zones.Load(name); seen {
		return true
	}
	_, err := time.LoadLocation(name)
	ok := err == nil && name != "Local"
	if ok {
		zones.Store(name, struct{}{}) // only known names are kept, so the map stays the database's size
	}
	return ok
}

// Browser reads a User-Agent header as a person would say it: "Chrome 131 on macOS",
// "Safari 17 on iOS", "Firefox 133 on Windows". An agent it does not know reads as "".
func Browser(ua string) string {
	name, version := "", ""
	for _, b := range [...]struct{ token, name string }{
		{"Edg/", "Edge"}, {"EdgA/", "Edge"}, {"EdgiOS/", "Edge"}, {"OPR/", "Opera"}, {"SamsungBrowser/", "Samsung Internet"},
		{"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"}, {"CriOS/", "Chrome"}, {"Chrome/", "Chrome"},
	} {
		if i := strings.Index(ua, b.token); i >= 0 {
			name, version = b.name, major(ua[i+len(b.token):])
			break
		}
	}
	if name == "" && strings.Contains(ua, "Safari/") {
		if i := strings.Index(ua, "Version/"); i >= 0 {
			name, version = "Safari", major(ua[i+len("Version/"):])
		}
	}
	if name == "" {
		return ""
	}
	if strings.Contains(ua, "HeadlessChrome/") {
		name = "Headless Chrome"
	}
	os := ""
	switch {
	case strings.Contains(ua, "iPhone"), strings.Contains(ua, "iPad"):
		os = "iOS"
	case strings.Contains(ua, "Android"):
		os = "Android"
	case strings.Contains(ua, "CrOS"):
		os = "ChromeOS"
	case strings.Contains(ua, "Windows"):
		os = "Windows"
	case strings.Contains(ua, "Mac OS X"), strings.Contains(ua, "Macintosh"):
		os = "macOS"
	case strings.Contains(ua, "Linux"):
		os = "Linux"
	}
	s := name
	if version != "" {
		s += " " + version
	}
	if os != "" {
		s += " on " + os
	}
	return s
}

func major(s string) string {
	n := 0
	for n < len(s) && n < 6 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return s[:n]
}

// Facts are the context's short facts for a line of text: browser, language, time zone and
// the referrer's host ("from google.com"); empty ones left out.
func (c *VisitorContext) Facts() []string {
	var out []string
	for _, f := range []string{c.Browser, c.Language, c.TimeZone} {
		if f != "" {
			out = append(out, f)
		}
	}
	if u, err := url.Parse(c.Referrer); err == nil && u.Host != "" {
		out = append(out, "from "+u.Host)
	}
	return out
}
