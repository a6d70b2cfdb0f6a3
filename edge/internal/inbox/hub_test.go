package inbox

import (
	"encoding/json"
	"reflect"
	"testing"

	"spookat/edge/internal/frames"
	"spookat/schema"
)

// messageEvent is the message event's documented shape (schema/PROTOCOL.md), as
// encoding/json would write it.
type messageEvent struct {
	Type           string                 `json:"type"`
	SiteID         int64                  `json:"site_id"`
	ConversationID int64                  `json:"conversation_id"`
	First          bool                   `json:"first,omitempty"`
	Message        frames.OperatorMessage `json:"message"`
}

// The message event built by hand says what encoding/json would say of its documented shape.
func TestInboxMessageFrameMatchesItsShape(t *testing.T) {
	for _, c := range []struct {
		name  string
		first bool
		m     frames.OperatorMessage
	}{
		{"plain", false, frames.OperatorMessage{ID: 7, Author: "visitor", Name: "", Text: "hello", CreatedAt: 1767225600123}},
		{"first, quotes and markup", true, frames.OperatorMessage{ID: 8, Author: "operator", Name: "Ann \"A\"", Text: `<b>"hi"</b> & \ bye`, CreatedAt: 1}},
		{"an attachment", false, frames.OperatorMessage{ID: 10, Author: "visitor", Text: "", CreatedAt: 3,
			File: operatorFile(&schema.File{ID: "k3y", Name: "shot \"1\".png", Type: "image/png", Size: 1234})}},
		{"a status change", false, frames.OperatorMessage{ID: 11, Author: "system", Name: "Ann", Text: "Closed by Ann", Internal: true, CreatedAt: 4, Kind: schema.KindClosed}},
		{"a reopening visitor message", false, frames.OperatorMessage{ID: 12, Author: "visitor", Text: "back again", CreatedAt: 5, Reopened: true}},
		{"internal note, newlines and unicode", false, frames.OperatorMessage{ID: 9, Author: "operator", Name: "Zoë", Text: "line\nnext\tend \u2028 ✓", Internal: true, CreatedAt: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := frames.InboxMessage(nil, 3, 44, c.first, &c.m)
			want, _ := json.Marshal(messageEvent{Type: "message", SiteID: 3, ConversationID: 44, First: c.first, Message: c.m})
			var got, exp map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("not JSON: %v: %s", err, b)
			}
			json.Unmarshal(want, &exp)
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("got  %s\nwant %s", b, want)
			}
		})
	}
}

// BenchmarkInboxMessageFrame: the message event as built for every message a watched site
// stores, by hand and (for comparison) by encoding/json.
func BenchmarkInboxMessageFrame(b *testing.B) {
	m := frames.OperatorMessage{ID: 123456, Author: "visitor", Name: "", Text: "Hello, I have a question about my order #12345, can you help me?", CreatedAt: 1767225600123}
	b.Run("frames", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			frames.InboxMessage(make([]byte, 0, 160+len(m.Text)), 3, 44, false, &m)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(messageEvent{Type: "message", SiteID: 3, ConversationID: 44, Message: m})
		}
	})
}
