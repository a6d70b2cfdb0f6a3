package main

import (
	"strings"
	"testing"
)

// TestSiteAddRefusesInternalTargets: `edge site add` and `edge seed` refuse the targets the
// worker would refuse before touching the data directory, naming the flag and a valid value,
// never repeating the URL (a Discord webhook's path is its token).
func TestSiteAddRefusesInternalTargets(t *testing.T) {
	const secret = "T0KEN-s3cr3t"
	for _, tc := range []struct {
		name string
		cmd  func([]string) error
		args []string
		want string
	}{
		{"nats port", siteAdd, []string{"-name", "Shop", "-origin", "https://shop.example", "-webhook-url", "http://127.0.0.1:4222/", "-webhook-secret", "s"},
			"-webhook-url must start with https://, e.g. -webhook-url https://example.com/hooks/spookat"},
		{"metadata", siteAdd, []string{"-name", "Shop", "-origin", "https://shop.example", "-webhook-url", "https://169.254.169.254/latest/meta-data/?" + secret, "-webhook-secret", "s"},
			"-webhook-url must not point at a non-public address (address 169.254.169.254 is cloud metadata), e.g. -webhook-url https://example.com/hooks/spookat"},
		{"discord elsewhere", siteAdd, []string{"-name", "Shop", "-origin", "https://shop.example", "-discord-webhook", "https://10.0.0.5/api/webhooks/1/" + secret},
			"-discord-webhook must not point at a non-public address (address 10.0.0.5 is private), e.g. -discord-webhook https://discord.com/api/webhooks/"},
		{"discord not discord", siteAdd, []string{"-name", "Shop", "-origin", "https://shop.example", "-discord-webhook", "https://hooks.example.com/api/webhooks/1/" + secret},
			"-discord-webhook must be a Discord webhook on discord.com, e.g. -discord-webhook https://discord.com/api/webhooks/"},
		{"seed loopback", seed, []string{"-sites", "1", "-webhook-url", "https://[::1]:8080/", "-webhook-secret", "s"},
			"-webhook-url must not point at a non-public address (address ::1 is loopback)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cmd(append([]string{"-data", t.TempDir()}, tc.args...))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to start %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q repeats the URL", err)
			}
		})
	}
}
