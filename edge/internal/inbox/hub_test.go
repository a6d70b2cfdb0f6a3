package inbox

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"

	"spookat/edge/internal/frames"
	"spookat/edge/internal/store"
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

// BenchmarkHubCommitted: what the writer pays a message with 50 inboxes open, each watching
// 24 of 1,200 sites (loadgen's one-process+inbox), in commits of 17 messages; each socket's
// events gathered by a goroutine, as its writer does (-cpu 1 counts their wake-ups in).
func BenchmarkHubCommitted(b *testing.B) {
	h := NewHub()
	const sites, inboxes, commit = 1200, 50, 17
	var conns []*opConn
	for i := range inboxes {
		c := newOpConn(nil, int64(i+1))
		ids := make([]int64, 0, sites/inboxes)
		for s := i; s < sites; s += inboxes {
			ids = append(ids, int64(s+1))
		}
		h.track(c)
		h.subscribe(c, ids)
		conns = append(conns, c)
		go func() { // the socket's writer, gathering its windows (ws.go), without the write
			out := newOpWriter(c, true)
			for {
				select {
				case <-c.ready:
					out.gather()
				case <-c.gone:
					return
				}
			}
		}()
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	msgs := make([]store.Committed, commit)
	for i := range msgs {
		msgs[i] = store.Committed{SiteID: int64(i*71%sites + 1), ConversationID: int64(i + 1), MessageID: int64(i + 1),
			Author: schema.AuthorVisitor, Text: "Hi! I have a question about my order, could someo", CreatedAt: 1767225600123}
	}
	b.ReportAllocs()
	for b.Loop() {
		h.Committed(msgs)
		runtime.Gosched() // the writer waits for its next batch: the sockets' writers run
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*commit), "ns/msg")
	for _, c := range conns {
		if c.isGone() {
			b.Fatal("an inbox fell behind and was closed")
		}
	}
}
