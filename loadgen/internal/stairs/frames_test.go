package stairs

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"spookat/schema"
)

func TestJSONField(t *testing.T) {
	ack, _ := json.Marshal(schema.Ack{Type: schema.FrameAck, ClientID: "ab12-7-z", MessageID: 42, ConversationID: 3, CreatedAt: time.Unix(1, 0).UTC()})
	if frameType(ack) != kindAck {
		t.Fatalf("type of %s", ack)
	}
	if v, s, ok := jsonField(ack, "client_id"); !ok || !s || string(v) != "ab12-7-z" {
		t.Fatalf("client_id = %q %v %v", v, s, ok)
	}
	if v, s, ok := jsonField(ack, "message_id"); !ok || s || string(v) != "42" {
		t.Fatalf("message_id = %q %v %v", v, s, ok)
	}
	e, _ := json.Marshal(schema.Error{Type: schema.FrameError, ClientID: "x-1-2", Code: schema.CodeBraked, Message: `the "site" is braked`, RetryAfterMS: 1500})
	if frameType(e) != kindError {
		t.Fatal("error type")
	}
	if v, _, _ := jsonField(e, "code"); string(v) != "braked" {
		t.Fatalf("code = %q", v)
	}
	if v, _, _ := jsonField(e, "retry_after_ms"); string(v) != "1500" {
		t.Fatalf("retry = %q", v)
	}
	// Keys that appear inside values are not keys; whitespace around the colon is allowed.
	tricky := []byte(`{ "message" : "type", "text":"\"type\":\"ack\"", "type" : "message" }`)
	if frameType(tricky) != kindMessage {
		t.Fatalf("tricky type")
	}
	if v, _, _ := jsonField(tricky, "text"); string(v) != `\"type\":\"ack\"` {
		t.Fatalf("escaped = %q", v)
	}
	if _, _, ok := jsonField([]byte(`{"a":1}`), "client_id"); ok {
		t.Fatal("absent key found")
	}
	if frameType([]byte(`{"type":"hello","visitor":"abc","conversation_id":null,"last_message_id":0}`)) != kindHello {
		t.Fatal("hello")
	}
}

func TestMessageFrameRoundTrip(t *testing.T) {
	prefix := []byte("k3x9-17-")
	for _, seq := range []uint64{0, 1, 35, 36, 123456789, 1<<40 + 7} {
		b := appendMessageFrame(nil, prefix, seq, []byte("hello there"))
		var f schema.ClientFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if f.Type != schema.FrameMessage || f.Text != "hello there" || f.ClientID != "k3x9-17-"+strconv.FormatUint(seq, 36) {
			t.Fatalf("%+v", f)
		}
		got, ok := clientSeq([]byte(f.ClientID), prefix)
		if !ok || got != seq {
			t.Fatalf("seq %d: got %d %v", seq, got, ok)
		}
	}
	if _, ok := clientSeq([]byte("k3x9-18-1"), prefix); ok {
		t.Fatal("other socket accepted")
	}
	if _, ok := clientSeq([]byte("k3x9-17-A"), prefix); ok {
		t.Fatal("bad digit accepted")
	}
}

func BenchmarkFrameParse(b *testing.B) {
	ack := []byte(`{"type":"ack","client_id":"ab12-700-zz3","message_id":123456,"conversation_id":789,"created_at":"2025-01-01T00:00:00.123Z"}`)
	prefix := []byte("ab12-700-")
	b.ReportAllocs()
	for b.Loop() {
		if frameType(ack) != kindAck {
			b.Fatal()
		}
		v, _, _ := jsonField(ack, "client_id")
		if _, ok := clientSeq(v, prefix); !ok {
			b.Fatal()
		}
	}
}
