package schema

import (
	"strings"
	"testing"
)

func TestCleanText(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "hello, world", "hello, world"},
		{"tab and newline stay", "a\tb\nc", "a\tb\nc"},
		{"NUL and ESC go", "a\x00b\x1b[31mc", "ab[31mc"},
		{"carriage return goes", "a\r\nb", "a\nb"},
		{"DEL and C1 go", "a\x7fb\u0085c", "abc"},
		{"bidi override goes", "invoice_\u202Egnp.exe", "invoice_gnp.exe"},
		{"bidi isolates go", "\u2066x\u2069", "x"},
		{"other scripts stay", "مرحبا 你好 👋", "مرحبا 你好 👋"},
		{"zero-width joiner stays (emoji)", "👩\u200d💻", "👩\u200d💻"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CleanText(c.in); got != c.want {
				t.Errorf("CleanText(%q) = %q, want %q", c.in, got, c.want)
			}
			if HasControl(c.in) != (c.in != c.want) {
				t.Errorf("HasControl(%q) = %v", c.in, HasControl(c.in))
			}
		})
	}
}

func BenchmarkCleanTextClean(b *testing.B) {
	s := "Hi, I have a question about my order #1234, it has not arrived yet."
	b.ReportAllocs()
	for b.Loop() {
		_ = CleanText(s)
	}
}

// A reply from Slack or Discord: a command alone, a note, or a message, cleaned and cut.
func TestParseReply(t *testing.T) {
	long := strings.Repeat("é", MaxTextRunes+5)
	for _, c := range []struct {
		raw  string
		want Reply
	}{
		{" /Close ", Reply{Kind: KindClosed}},
		{"/reopen", Reply{Kind: KindReopened}},
		{"/close now", Reply{Text: "/close now"}},
		{"NOTE:  call them back", Reply{Internal: true, Text: "call them back"}},
		{"hello\x1b[31m", Reply{Text: "hello[31m"}},
		{long, Reply{Text: long[:2*MaxTextRunes]}},
	} {
		if got := ParseReply(c.raw); got != c.want {
			t.Errorf("ParseReply(%.20q) = %+v, want %+v", c.raw, got, c.want)
		}
	}
}
