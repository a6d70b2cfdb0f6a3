package store

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"

	"spookat/schema"
)

// Checks of site settings given by people (the CLI and the inbox's settings page): a value
// that can never work is refused when it is typed, not discovered when nothing arrives.

// NormalizeOrigin checks an allowed origin, scheme://host[:port] or *, and returns it
// without surrounding space or a trailing slash. A browser's Origin header never has a path
// nor a default port, so an origin with one could never match.
func NormalizeOrigin(o string) (string, error) {
	o = strings.TrimRight(strings.TrimSpace(o), "/")
	if o == "*" {
		return o, nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q must be scheme://host[:port], e.g. https://shop.example (or * for development)", o)
	}
	if u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return "", fmt.Errorf("origin %q must be scheme and host only, no path, e.g. %s://%s", o, u.Scheme, u.Host)
	}
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		return "", fmt.Errorf("origin %q names the default port, which browsers leave out: use %s://%s", o, u.Scheme, u.Hostname())
	}
	return o, nil
}

// CheckSlackChannel checks the shape of a Slack channel id: C (channel), G (private) or D
// (direct message), then at least 8 uppercase letters or digits, e.g. C0123ABCD. A channel
// name such as #support is not an id.
func CheckSlackChannel(id string) error {
	ok := len(id) >= 9 && strings.ContainsRune("CGD", rune(id[0]))
	for i := 1; ok && i < len(id); i++ {
		c := id[i]
		ok = ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
	}
	if !ok {
		return fmt.Errorf("slack channel %q is not a channel id: C, G or D then 8 or more capitals or digits, e.g. C0123ABCD (Slack shows it under the channel's name, About)", id)
	}
	return nil
}

// CheckSlackToken checks the shape of a Slack token: xoxb- (a bot's; xoxp-, xoxe.xoxb-
// too) then letters, digits and dashes. A placeholder copied from the docs (xoxb-…) or a
// token with a space pasted in is refused here rather than by Slack at every post.
func CheckSlackToken(token string) error {
	rest, ok := strings.CutPrefix(token, "xoxe.")
	ok = strings.HasPrefix(rest, "xoxb-") || strings.HasPrefix(rest, "xoxp-")
	body := rest[min(len(rest), 5):]
	ok = ok && body != "" && strings.Trim(body, "-") != ""
	for i := 0; ok && i < len(body); i++ {
		c := body[i]
		ok = ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '-'
	}
	if !ok {
		return errors.New("slack token is not a Slack bot token: xoxb- then letters, digits and dashes, as Slack shows it under OAuth & Permissions (the docs' xoxb-… is a placeholder)")
	}
	return nil
}

// CheckEmail checks an email address given by a person: local@domain, nothing around it.
func CheckEmail(addr string) error {
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr || !strings.Contains(addr, "@") || len(addr) > schema.MaxEmailLen {
		return fmt.Errorf("%q is not an email address: local part, @, domain, e.g. ann@shop.example", addr)
	}
	return nil
}
