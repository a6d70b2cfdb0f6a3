package frames

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"spookat/schema"
)

// Every encoder's output decodes with encoding/json into the schema types, whatever the text.
func TestFramesDecode(t *testing.T) {
	texts := []string{"hi", `<img src=x onerror=alert(1)>`, "quote \" back \\ slash", "tab\tnl\n\x01", "é ü 日本 🎉", "bad \xff utf8", "\u2028sep"}
	for _, text := range texts {
		var m schema.Message
		file := &schema.File{ID: "k", Name: text, Type: "image/png", Size: 99, URL: "/v1/files/k?exp=1&sig=a%2Bb"}
		if err := json.Unmarshal(Message(nil, 7, "visitor", "Ann", text, "c-1", 1700000000123, file), &m); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		want := text
		if text == "bad \xff utf8" {
			want = "bad \ufffd utf8"
		}
		if m.Text != want || m.MessageID != 7 || m.ClientID != "c-1" || !m.CreatedAt.Equal(time.UnixMilli(1700000000123)) ||
			m.File == nil || m.File.Name != want || m.File.Size != 99 || m.File.URL != file.URL {
			t.Fatalf("%q decoded as %+v", text, m)
		}
		var a schema.Ack
		if err := json.Unmarshal(Ack(nil, text, 1, 2, 1700000000123), &a); err != nil || a.ClientID != want || a.ConversationID != 2 {
			t.Fatalf("ack %q: %+v %v", text, a, err)
		}
		var e schema.Error
		if err := json.Unmarshal(Error(nil, "c", "invalid", text, 1500), &e); err != nil || e.Message != want || e.RetryAfterMS != 1500 {
			t.Fatalf("error %q: %+v %v", text, e, err)
		}
	}
	var h schema.Hello
	if err := json.Unmarshal(Hello(nil, "tok", ConversationState{}, nil, "away", ""), &h); err != nil || h.ConversationID != nil || h.Visitor != "tok" {
		t.Fatalf("hello: %+v %v", h, err)
	}
	if err := json.Unmarshal(Hello(nil, "tok", ConversationState{ID: 5, LastMessageID: 9, ReadMessageID: 7, SeenMessageID: 8, Status: "closed", Rating: "good"},
		[]byte(`{"title":"Hi"}`), "online", "2026-12-04T08:00:00Z"), &h); err != nil || *h.ConversationID != 5 || h.LastMessageID != 9 ||
		h.ReadMessageID != 7 || h.SeenMessageID != 8 || h.Site.Title != "Hi" || h.Status != "online" ||
		h.ConversationStatus != "closed" || h.Rating != "good" || h.OpensAt != "2026-12-04T08:00:00Z" {
		t.Fatalf("hello: %+v %v", h, err)
	}
	var id schema.Identified
	if err := json.Unmarshal(Identified(nil, true, ConversationState{ID: 3, LastMessageID: 4, Status: "open"}), &id); err != nil ||
		!id.Verified || *id.ConversationID != 3 || id.LastMessageID != 4 || id.ConversationStatus != "open" {
		t.Fatalf("identified: %+v %v", id, err)
	}
	var ty schema.Typing
	if err := json.Unmarshal(Typing(nil, `Ana "A"`), &ty); err != nil || ty.Type != "typing" || ty.Name != `Ana "A"` {
		t.Fatalf("typing: %+v %v", ty, err)
	}
	var se schema.Seen
	if err := json.Unmarshal(Seen(nil, 42), &se); err != nil || se.Type != "seen" || se.MessageID != 42 {
		t.Fatalf("seen: %+v %v", se, err)
	}
}

func BenchmarkAck(b *testing.B) {
	buf := make([]byte, 0, 256)
	for b.Loop() {
		buf = Ack(buf[:0], "0b6f0c1e-5d2a-4d43-9a55-2f1c7c4b9d10", 123456789, 98765, 1700000000123)
	}
}

// AppendTime writes what time's RFC 3339 layout writes: at every day's first and last
// millisecond from 1970 to 2200 (leap years, centuries, 2000), at random instants up to
// year 9999, and on both sides of the fast path's bounds.
func TestAppendTimeAgreesWithTime(t *testing.T) {
	want := func(ms int64) string {
		return `"` + time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"`
	}
	check := func(ms int64) {
		t.Helper()
		if got := string(AppendTime(nil, ms)); got != want(ms) {
			t.Fatalf("AppendTime(%d) = %s, want %s", ms, got, want(ms))
		}
	}
	end := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for day := int64(0); day*86_400_000 < end; day++ {
		check(day * 86_400_000)
		check(day*86_400_000 + 86_399_999)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(rng.Int64N(maxFastMs))
	}
	for _, ms := range []int64{-1, -86_400_001, 0, 951_782_400_000, maxFastMs - 1, maxFastMs, maxFastMs + 1} {
		check(ms)
	}
}

func BenchmarkAppendTime(b *testing.B) {
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = AppendTime(buf[:0], 1700000000123)
	}
}
