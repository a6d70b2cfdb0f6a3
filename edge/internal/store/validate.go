package store

import (
	"fmt"
	"net/url"
	"strings"
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
