package store_test

import (
	"testing"

	"spookat/edge/internal/store"
)

func TestNormalizeOrigin(t *testing.T) {
	for _, c := range []struct {
		in, want string // want "" means refused
	}{
		{"https://shop.example", "https://shop.example"},
		{" https://shop.example/ ", "https://shop.example"},
		{"http://localhost:3000", "http://localhost:3000"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"*", "*"},
		{"shop.example", ""},
		{"//shop.example", ""},
		{"ftp://shop.example", ""},
		{"https://shop.example/chat", ""},
		{"https://shop.example?x=1", ""},
		{"https://shop.example#top", ""},
		{"https://user@shop.example", ""},
		{"https://shop.example:443", ""},
		{"http://shop.example:80", ""},
		{"https://", ""},
		{"", ""},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := store.NormalizeOrigin(c.in)
			if c.want == "" {
				if err == nil {
					t.Errorf("accepted as %q", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("= %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestCheckSlackChannel(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{
		{"C0123ABCD", true}, {"G01234567", true}, {"D0123ABCDEFGH", true},
		{"C1", false}, {"C0123abcd", false}, {"#support", false}, {"general", false}, {"X0123ABCD", false}, {"", false},
	} {
		t.Run(c.id, func(t *testing.T) {
			if err := store.CheckSlackChannel(c.id); (err == nil) != c.ok {
				t.Errorf("CheckSlackChannel(%q) = %v, want ok=%v", c.id, err, c.ok)
			}
		})
	}
}
