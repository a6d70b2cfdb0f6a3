package egress_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"spookat/schema/testkit"
	"spookat/worker/egress"
)

func TestCheckIP(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		reason string // "" for public
	}{
		{"93.184.215.14", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:93.184.215.14", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.5", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:10.0.0.5", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "cloud metadata"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"fd00:ec2::254", "cloud metadata"},
		{"100.100.100.200", "cloud metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"224.0.0.1", "multicast"},
		{"239.1.2.3", "multicast"},
		{"ff02::1", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"100.127.255.254", "shared (CGNAT)"},
		{"255.255.255.255", "reserved"},
		{"240.0.0.1", "reserved"},
		{"192.0.2.1", "reserved"},
		{"::127.0.0.1", "reserved"},     // IPv4-compatible form
		{"64:ff9b::7f00:1", "loopback"}, // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", "cloud metadata"},
		{"64:ff9b::5db8:d70e", ""},      // NAT64 of a public address
		{"2002:7f00:1::1", "loopback"},  // 6to4 of 127.0.0.1
		{"2002:c0a8:101::1", "private"}, // 6to4 of 192.168.1.1
	} {
		t.Run(tc.ip, func(t *testing.T) {
			err := egress.CheckIP(netip.MustParseAddr(tc.ip))
			var re *egress.RefusedError
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.reason != "" && !errors.As(err, &re):
				t.Fatalf("allowed, want refused as %s", tc.reason)
			case tc.reason != "" && re.Reason != tc.reason:
				t.Fatalf("refused as %q, want %q", re.Reason, tc.reason)
			}
		})
	}
}

func TestCheckURLs(t *testing.T) {
	const tok = "https://discord.com/api/webhooks/123456789012345678/s3cr3t-T0KEN"
	for _, tc := range []struct {
		name    string
		discord bool
		url     string
		private bool   // -allow-private-targets
		want    string // part of the error; "" for accepted
	}{
		{"webhook https", false, "https://hooks.example.com/spookat?x=1", false, ""},
		{"webhook port", false, "https://hooks.example.com:8443/in", false, ""},
		{"webhook public ip", false, "https://93.184.215.14/in", false, ""},
		{"webhook http", false, "http://hooks.example.com/in", false, "https://"},
		{"webhook ftp", false, "ftp://hooks.example.com/in", false, "https://"},
		{"webhook no scheme", false, "hooks.example.com/in", false, "https://"},
		{"webhook opaque", false, "https:hooks.example.com", false, "not a URL"},
		{"webhook no host", false, "https:///in", false, "host"},
		{"webhook userinfo", false, "https://user:pw@hooks.example.com/in", false, "user name"},
		{"webhook loopback", false, "https://127.0.0.1:4222/", false, "loopback"},
		{"webhook loopback v6", false, "https://[::1]/", false, "loopback"},
		{"webhook mapped", false, "https://[::ffff:127.0.0.1]/", false, "loopback"},
		{"webhook zone", false, "https://[fe80::1%25eth0]/", false, "zone"},
		{"webhook private", false, "https://10.0.0.5/hook", false, "private"},
		{"webhook metadata", false, "https://169.254.169.254/latest/meta-data/", false, "cloud metadata"},
		{"webhook metadata v6", false, "https://[fd00:ec2::254]/", false, "cloud metadata"},
		{"webhook metadata name", false, "https://metadata.google.internal/computeMetadata/v1/", false, "metadata"},
		{"webhook unspecified", false, "https://0.0.0.0:8080/", false, "unspecified"},
		{"webhook cgnat", false, "https://100.64.1.1/", false, "CGNAT"},
		{"webhook localhost", false, "https://localhost:8080/v1/api", false, "localhost"},
		{"webhook sub.localhost", false, "https://edge.localhost./", false, "localhost"},
		{"webhook decimal ip", false, "https://2130706433/", false, "four decimal numbers"},
		{"webhook hex ip", false, "https://0x7f000001/", false, "four decimal numbers"},
		{"webhook hex dotted", false, "https://0x7f.0.0.1/", false, "four decimal numbers"},
		{"webhook octal", false, "https://0177.0.0.1/", false, "four decimal numbers"},
		{"webhook short form", false, "https://127.1/", false, "four decimal numbers"},
		{"webhook numeric tld", false, "https://hooks.example.123/", false, "four decimal numbers"},
		{"webhook lab http loopback", false, "http://127.0.0.1:9/never-called", true, ""},
		{"webhook lab localhost", false, "https://localhost/", true, ""},
		{"webhook lab still no userinfo", false, "http://u@127.0.0.1/", true, "user name"},
		{"webhook lab still decimal", false, "http://2130706433/", true, "four decimal numbers"},

		{"discord", true, tok, false, ""},
		{"discord versioned", true, "https://discord.com/api/v10/webhooks/1/abc", false, ""},
		{"discordapp", true, "https://discordapp.com/api/webhooks/1/abc", false, ""},
		{"discord port 443", true, "https://discord.com:443/api/webhooks/1/abc", false, ""},
		{"discord http", true, "http://discord.com/api/webhooks/1/abc", false, "https://"},
		{"discord other host", true, "https://discord.example.com/api/webhooks/1/abc", false, "discord.com"},
		{"discord lookalike", true, "https://discord.com.evil.example/api/webhooks/1/abc", false, "discord.com"},
		{"discord userinfo", true, "https://discord.com@127.0.0.1/api/webhooks/1/abc", false, "user name"},
		{"discord port", true, "https://discord.com:4222/api/webhooks/1/abc", false, "port"},
		{"discord other path", true, "https://discord.com/api/channels/1/messages", false, "Discord webhook URL"},
		{"discord no token", true, "https://discord.com/api/webhooks/1/", false, "Discord webhook URL"},
		{"discord id not numeric", true, "https://discord.com/api/webhooks/abc/tok", false, "Discord webhook URL"},
		{"discord traversal", true, "https://discord.com/api/webhooks/1/../../users/@me", false, "Discord webhook URL"},
		{"discord lab mock", true, "http://127.0.0.1:9999/api/webhooks/1/abc", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := egress.CheckWebhookURL
			if tc.discord {
				check = egress.CheckDiscordURL
			}
			err := check(tc.url, tc.private)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error about %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "/api/")) {
				t.Fatalf("error repeats the URL: %q", err)
			}
		})
	}
}

// TestDialRefusesResolvedLoopback: the name passes the save-time check only with the lab
// switch, but what matters is that the address it resolves to at connect time is checked,
// whatever the name: "localhost" here stands in for a rebinding name.
func TestDialRefusesResolvedLoopback(t *testing.T) {
	hit := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- struct{}{} }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	target := "http://localhost:" + port + "/secret-path?token=abc"

	for _, tc := range []struct {
		name    string
		private bool
		want    string // Reason of the error; "" for delivered
	}{
		{"guarded", false, "refused: address 127.0.0.1 is loopback"},
		{"lab switch", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := egress.Client(nil, 5*time.Second, tc.private)
			resp, err := c.Post(target, "application/json", strings.NewReader("{}"))
			if resp != nil {
				resp.Body.Close()
			}
			got := egress.Reason(err)
			if got != tc.want && !(tc.want != "" && strings.HasPrefix(got, "refused: address ") && strings.HasSuffix(got, " is loopback")) {
				t.Fatalf("reason %q (err %v), want %q", got, err, tc.want)
			}
			if strings.Contains(got, "secret-path") || strings.Contains(got, "token") {
				t.Fatalf("reason holds the URL: %q", got)
			}
			select {
			case <-hit:
				if tc.want != "" {
					t.Fatal("the refused target was reached")
				}
			default:
				if tc.want == "" {
					t.Fatal("the allowed target was not reached")
				}
			}
		})
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	elsewhere := make(chan struct{}, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere <- struct{}{} }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/latest/meta-data/", http.StatusFound)
	}))
	defer srv.Close()
	c := egress.Client(nil, 5*time.Second, true) // loopback test servers: only the redirect rule is under test
	resp, err := c.Post(srv.URL+"/hook", "application/json", strings.NewReader("{}"))
	testkit.NoErr(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the 302 itself", resp.StatusCode)
	}
	select {
	case <-elsewhere:
		t.Fatal("the redirect was followed")
	default:
	}
}

// TestReasonHidesWhatCameBack: a non-HTTP service on the target port (NATS answers with its
// INFO line) must not have its banner, nor the URL, in the reason; whether its greeting
// reaches the client before or after the request went out (a race on a real network: net/http
// reports the two differently), the reason is the same.
func TestReasonHidesWhatCameBack(t *testing.T) {
	for _, greetFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("greets first %v", greetFirst), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			testkit.NoErr(t, err)
			defer ln.Close()
			go func() {
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					r := bufio.NewReader(conn)
					if !greetFirst {
						_, _ = r.ReadString('\n') // the request line, then the banner
					}
					_, _ = conn.Write([]byte(`INFO {"server_id":"NSECRET","version":"2.15.3"}` + "\r\n"))
					_, _ = r.ReadString('\n')
					conn.Close()
				}
			}()
			c := egress.Client(nil, 5*time.Second, true)
			_, err = c.Post("http://"+ln.Addr().String()+"/api/webhooks/1/T0KEN", "application/json", strings.NewReader("{}"))
			if err == nil {
				t.Fatal("a NATS port answered like an HTTP server")
			}
			got := egress.Reason(err)
			if got != "the server does not speak HTTP" {
				t.Errorf("reason %q (err %v)", got, err)
			}
			for _, bad := range []string{"INFO", "NSECRET", "T0KEN", "webhooks"} {
				if strings.Contains(got, bad) {
					t.Fatalf("reason %q holds %q (err %v)", got, bad, err)
				}
			}
		})
	}
	c := egress.Client(nil, 5*time.Second, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:9/x", nil)
	_, err := c.Do(req)
	if got := egress.Reason(err); got != "timeout" {
		t.Fatalf("reason %q for a deadline, want timeout", got)
	}
}
