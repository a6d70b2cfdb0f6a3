package schema

import "strings"

// CleanText removes what must never reach an operator, a Slack thread, a webhook or an email
// from text written by a visitor or an operator: C0 control characters other than tab and
// newline (NUL, ESC…; a carriage return too: newlines are "\n"), DEL, C1 controls, and the
// bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069) that make text read in
// another order than it is stored. Text without them is returned as is, without allocating.
func CleanText(s string) string {
	i := strings.IndexFunc(s, unwanted)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if !unwanted(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// HasControl reports whether s holds a character CleanText would remove (for identifiers,
// which are refused rather than changed).
func HasControl(s string) bool { return strings.IndexFunc(s, unwanted) >= 0 }

func unwanted(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Reply is what an operator wrote in a conversation's Slack or Discord thread, as the edge
// stores it.
type Reply struct {
	Kind     MessageKind // KindClosed or KindReopened: the reply was just "/close" or "/reopen"
	Internal bool        // it started with "note:": a note for operators only
	Text     string      // cleaned (CleanText), without "note:", cut to MaxTextRunes
}

// ParseReply reads a reply from Slack or Discord: a status command (any case, spaces around
// it ignored), an internal note, or a message.
func ParseReply(raw string) Reply {
	text := CleanText(strings.TrimSpace(raw))
	switch strings.ToLower(text) {
	case "/close":
		return Reply{Kind: KindClosed}
	case "/reopen":
		return Reply{Kind: KindReopened}
	}
	r := Reply{Text: text}
	if len(text) >= 5 && strings.EqualFold(text[:5], "note:") {
		r.Internal, r.Text = true, strings.TrimSpace(text[5:])
	}
	if runes := []rune(r.Text); len(runes) > MaxTextRunes {
		r.Text = string(runes[:MaxTextRunes])
	}
	return r
}
