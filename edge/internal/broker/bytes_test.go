package broker_test

import (
	"strings"
	"testing"

	"spookat/edge/internal/broker"
)

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string // part of the error; "" for none
	}{
		{"1GiB", 1 << 30, ""},
		{"512MiB", 512 << 20, ""},
		{"64KiB", 64 << 10, ""},
		{"2gib", 2 << 30, ""},
		{"1.5GiB", 3 << 29, ""},
		{"1G", 1 << 30, ""},
		{"2GB", 2e9, ""},
		{"1048576", 1 << 20, ""},
		{"100B", 100, ""},
		{" 8 MiB ", 8 << 20, ""},
		{"", 0, "e.g. 1GiB"},
		{"GiB", 0, "e.g. 1GiB"},
		{"lots", 0, "e.g. 1GiB"},
		{"-1GiB", 0, "e.g. 1GiB"},
		{"9999999TiB", 0, "out of range"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := broker.ParseBytes(c.in)
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("ParseBytes(%q) = %d, %v; want an error with %q", c.in, got, err, c.err)
			case c.err == "" && (err != nil || got != c.want):
				t.Fatalf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
		})
	}
}

func TestFormatBytesRoundTrips(t *testing.T) {
	for _, n := range []int64{1 << 30, 1536 << 20, 64 << 10, 65537, 256 << 20, 3 << 40} {
		s := broker.FormatBytes(n)
		if back, err := broker.ParseBytes(s); err != nil || back != n {
			t.Errorf("FormatBytes(%d) = %q, which reads back as %d, %v", n, s, back, err)
		}
	}
	if s := broker.FormatBytes(1 << 30); s != "1GiB" {
		t.Errorf("FormatBytes(1<<30) = %q, want 1GiB", s)
	}
}

func TestBytesFlagRefusesTinyBudgets(t *testing.T) {
	var b broker.Bytes
	if err := b.Set("1KiB"); err == nil || !strings.Contains(err.Error(), "e.g. 1GiB") {
		t.Fatalf("Set(1KiB) = %v, want a refusal with an example", err)
	}
	if err := b.Set("64KiB"); err != nil || b != broker.MinStreamBytes {
		t.Fatalf("Set(64KiB) = %v, %d", err, b)
	}
}
