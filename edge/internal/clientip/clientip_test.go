package clientip

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/gofiber/fiber/v2"

	"spookat/schema/testkit"
)

func TestIP(t *testing.T) {
	// app.Test connects from 0.0.0.0.
	trusted, err := ParsePrefixes("0.0.0.0/32, 10.0.0.0/8")
	testkit.NoErr(t, err)
	cases := []struct {
		name    string
		r       *Resolver
		forward string
		want    string
	}{
		{"no header configured: the peer", &Resolver{}, "203.0.113.9", "0.0.0.0"},
		{"untrusted peer: header ignored", &Resolver{Header: "X-Forwarded-For", Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "203.0.113.9", "0.0.0.0"},
		{"trusted peer, one hop", &Resolver{Header: "X-Forwarded-For", Trusted: trusted}, "203.0.113.9", "203.0.113.9"},
		{"a spoofed leftmost entry is skipped", &Resolver{Header: "X-Forwarded-For", Trusted: trusted}, "1.2.3.4, 203.0.113.9", "203.0.113.9"},
		{"trusted hops are walked past", &Resolver{Header: "X-Forwarded-For", Trusted: trusted}, "1.2.3.4, 203.0.113.9, 10.1.1.1", "203.0.113.9"},
		{"garbage stops the walk", &Resolver{Header: "X-Forwarded-For", Trusted: trusted}, "203.0.113.9, nonsense", "0.0.0.0"},
		{"no header sent", &Resolver{Header: "X-Forwarded-For", Trusted: trusted}, "", "0.0.0.0"},
		{"IPv6", &Resolver{Header: "X-Forwarded-For", Trusted: trusted}, "2001:db8::1", "2001:db8::1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := fiber.New()
			app.Get("/", func(ctx *fiber.Ctx) error { return ctx.SendString(c.r.IP(ctx).String()) })
			req := httptest.NewRequest("GET", "/", nil)
			if c.forward != "" {
				req.Header.Set("X-Forwarded-For", c.forward)
			}
			resp, err := app.Test(req)
			testkit.NoErr(t, err)
			buf := make([]byte, 64)
			n, _ := resp.Body.Read(buf)
			if got := string(buf[:n]); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes("10.0.0.0/8,192.0.2.7 , ::1")
	if err != nil || len(got) != 3 || got[1].String() != "192.0.2.7/32" || got[2].String() != "::1/128" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ParsePrefixes("10.0.0.0/8,shop"); err == nil {
		t.Fatal("a name was accepted as a proxy")
	}
}
