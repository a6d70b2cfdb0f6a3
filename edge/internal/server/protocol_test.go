package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"
	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

func startWithSite(t *testing.T) (*edgetest.Edge, *store.Site) {
	t.Helper()
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "proto", Origins: []string{"http://site.test"}})
	return e, site
}

func TestHelloGivesNewTokenToUnknownVisitor(t *testing.T) {
	e, site := startWithSite(t)
	for _, token := range []string{"", "short", strings.Repeat("A", schema.VisitorTokenLen)} {
		c := edgetest.Dial(t, e.Addr, site.Key, token)
		if len(c.Hello.Visitor) != schema.VisitorTokenLen || c.Hello.Visitor == token {
			t.Fatalf("token %q: hello visitor %q", token, c.Hello.Visitor)
		}
		if c.Hello.ConversationID != nil || c.Hello.LastMessageID != 0 {
			t.Fatalf("new visitor hello = %+v", c.Hello)
		}
	}
}

// The ack arrives only after commit: when it does, a second connection reads the row.
func TestAckAfterCommitAndIdempotentResend(t *testing.T) {
	e, site := startWithSite(t)
	db := edgetest.OpenDB(t, e.DataDir)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	c.Message(t, "c-1", "hello there")
	ack := c.Read(t)
	if ack.Type != "ack" || ack.ClientID != "c-1" || ack.MessageID == 0 || ack.ConversationID == nil {
		t.Fatalf("ack = %+v", ack)
	}
	if _, err := time.Parse(time.RFC3339, ack.CreatedAt); err != nil {
		t.Fatalf("created_at %q: %v", ack.CreatedAt, err)
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE id = ? AND text = 'hello there'`, ack.MessageID); n != 1 {
		t.Fatalf("row of acked message %d not readable (count %d)", ack.MessageID, n)
	}
	// Same client id again: same ack, nothing new stored.
	c.Message(t, "c-1", "hello there")
	again := c.Read(t)
	if again.Type != "ack" || again.MessageID != ack.MessageID || again.CreatedAt != ack.CreatedAt {
		t.Fatalf("resend ack = %+v, first = %+v", again, ack)
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != 1 {
		t.Fatalf("%d messages stored after a resend, want 1", n)
	}
}

func TestResumeInOrderAfterReconnect(t *testing.T) {
	e, site := startWithSite(t)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	var ids []int64
	for i := range 5 {
		c.Message(t, fmt.Sprint("m", i), fmt.Sprint("text ", i))
		ack := c.Read(t)
		if ack.Type != "ack" {
			t.Fatalf("ack = %+v", ack)
		}
		ids = append(ids, ack.MessageID)
	}
	c.WS.Close()

	back := edgetest.Dial(t, e.Addr, site.Key, c.Hello.Visitor)
	if back.Hello.Visitor != c.Hello.Visitor || back.Hello.ConversationID == nil || back.Hello.LastMessageID != ids[4] {
		t.Fatalf("returning hello = %+v (want visitor %s, last %d)", back.Hello, c.Hello.Visitor, ids[4])
	}
	back.Send(t, map[string]any{"type": "resume", "after_message_id": ids[1]})
	for i := 2; i < 5; i++ {
		m := back.Read(t)
		if m.Type != "message" || m.MessageID != ids[i] || m.Text != fmt.Sprint("text ", i) || m.Author != "visitor" || m.ClientID != fmt.Sprint("m", i) {
			t.Fatalf("resumed frame %d = %+v", i, m)
		}
	}
	// Nothing more: the next frame is the ack of a new message, not a repeat.
	back.Message(t, "m5", "after resume")
	if f := back.Read(t); f.Type != "ack" || f.ClientID != "m5" {
		t.Fatalf("after resume got %+v", f)
	}
}

// Every recoverable error is answered with its code and a sentence, and the socket goes on.
func TestErrorFramesKeepConnectionOpen(t *testing.T) {
	e, site := startWithSite(t)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	cases := []struct {
		name  string
		frame string
		code  string
	}{
		{"not json", `{"type":`, schema.CodeInvalid},
		{"unknown type", `{"type":"shout"}`, schema.CodeInvalid},
		{"no client id", `{"type":"message","text":"hi"}`, schema.CodeInvalid},
		{"client id too long", `{"type":"message","client_id":"` + strings.Repeat("x", 65) + `","text":"hi"}`, schema.CodeInvalid},
		{"empty text", `{"type":"message","client_id":"e1","text":"   "}`, schema.CodeInvalid},
		{"text too long", `{"type":"message","client_id":"e2","text":"` + strings.Repeat("é", schema.MaxTextRunes+1) + `"}`, schema.CodeTooLarge},
		{"negative resume", `{"type":"resume","after_message_id":-1}`, schema.CodeInvalid},
	}
	for _, tc := range cases {
		testkit.NoErr(t, c.WS.WriteMessage(fws.TextMessage, []byte(tc.frame)))
		f := c.Read(t)
		if f.Type != "error" || f.Code != tc.code || len(f.Message) < 10 {
			t.Fatalf("%s: got %+v, want error %s with a sentence", tc.name, f, tc.code)
		}
	}
	testkit.NoErr(t, c.WS.WriteMessage(fws.BinaryMessage, []byte{1, 2, 3}))
	if f := c.Read(t); f.Code != schema.CodeInvalid {
		t.Fatalf("binary frame: %+v", f)
	}
	// Exactly 4,000 characters is fine, and the socket still works.
	c.Message(t, "ok", strings.Repeat("é", schema.MaxTextRunes))
	if f := c.Read(t); f.Type != "ack" || f.ClientID != "ok" {
		t.Fatalf("after errors got %+v", f)
	}
}

func TestFrameOver16KiBClosesWith1009(t *testing.T) {
	e, site := startWithSite(t)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	big := `{"type":"message","client_id":"big","text":"` + strings.Repeat("a", schema.MaxFrameBytes) + `"}`
	testkit.NoErr(t, c.WS.WriteMessage(fws.TextMessage, []byte(big)))
	_, err := c.ReadErr(10 * time.Second)
	if !fws.IsCloseError(err, fws.CloseMessageTooBig) {
		t.Fatalf("read after a 16 KiB+ frame: %v, want close 1009", err)
	}
}

func TestUpgradeRefusals(t *testing.T) {
	e, site := startWithSite(t)
	check := func(name string, resp *http.Response, err error, status int, code string) {
		t.Helper()
		if err == nil || resp == nil || resp.StatusCode != status {
			t.Fatalf("%s: err %v, resp %v; want %d", name, err, resp, status)
		}
		var body schema.HTTPError
		b, _ := io.ReadAll(resp.Body)
		if json.Unmarshal(b, &body) != nil || body.Code != code || body.Message == "" {
			t.Fatalf("%s: body %s, want code %s", name, b, code)
		}
	}
	_, resp, err := edgetest.DialRaw(e.Addr, "st_nope", "", "http://site.test")
	check("unknown site", resp, err, http.StatusNotFound, "unknown_site")
	_, resp, err = edgetest.DialRaw(e.Addr, "", "", "http://site.test")
	check("no site", resp, err, http.StatusNotFound, "unknown_site")
	_, resp, err = edgetest.DialRaw(e.Addr, site.Key, "", "http://evil.test")
	check("other origin", resp, err, http.StatusForbidden, "origin_not_allowed")
	_, resp, err = edgetest.DialRaw(e.Addr, site.Key, "", "")
	check("no origin", resp, err, http.StatusForbidden, "origin_not_allowed")

	// Past the site's checks, a request that is not a websocket handshake, or a malformed
	// one, gets a status and a sentence too.
	get := func(hdr map[string]string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", "http://"+e.Addr+"/v1/widget/ws?site="+site.Key, nil)
		req.Header.Set("Origin", "http://site.test")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			t.Cleanup(func() { resp.Body.Close() })
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return resp, err
	}
	resp, err = get(nil)
	check("plain GET", resp, err, http.StatusUpgradeRequired, "upgrade_required")
	resp, err = get(map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "8",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
	check("old websocket version", resp, err, http.StatusBadRequest, "bad_handshake")
}

// A visitor's second tab sees the first tab's messages live; the sender gets only its ack.
func TestLiveFanOutToOtherSockets(t *testing.T) {
	e, site := startWithSite(t)
	a := edgetest.Dial(t, e.Addr, site.Key, "")
	a.Message(t, "first", "opening")
	if f := a.Read(t); f.Type != "ack" {
		t.Fatalf("ack = %+v", f)
	}
	b := edgetest.Dial(t, e.Addr, site.Key, a.Hello.Visitor)
	a.Message(t, "second", "live one")
	ack := a.Read(t)
	m := b.Read(t)
	if m.Type != "message" || m.MessageID != ack.MessageID || m.Text != "live one" {
		t.Fatalf("other tab got %+v, want message %d", m, ack.MessageID)
	}
}

// A script flooding one socket gets rate_limited; a site flooded with new conversations gets
// braked while another site's visitors are untouched. Nothing refused is stored.
func TestBrakesAnswerWithCodes(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{Brakes: brakes.Config{
		ConnMsgRate: 1, ConnMsgBurst: 3,
		FloodThreshold: 2, FloodDivisor: 10, FloodMaxLevel: 3,
	}})
	flooded := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "flooded", Origins: []string{"*"}})
	calm := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "calm", Origins: []string{"*"}})
	db := edgetest.OpenDB(t, e.DataDir)

	c := edgetest.Dial(t, e.Addr, flooded.Key, "")
	for i := range 3 {
		c.Message(t, fmt.Sprint("ok", i), "hi")
		if f := c.Read(t); f.Type != "ack" {
			t.Fatalf("message %d within the burst: %+v", i, f)
		}
	}
	c.Message(t, "flood", "hi")
	f := c.Read(t)
	if f.Type != "error" || f.Code != schema.CodeRateLimited || f.ClientID != "flood" || f.RetryAfterMS <= 0 || f.RetryAfterMS > 1000 {
		t.Fatalf("over the connection's rate: %+v", f)
	}

	// The flood threshold is 2 new conversations a minute: the visitor above opened one, the
	// next opens the second, and the ones after are braked.
	for i := range 3 {
		v := edgetest.Dial(t, e.Addr, flooded.Key, "")
		v.Message(t, "first", "new conversation")
		f := v.Read(t)
		if i == 0 && f.Type != "ack" {
			t.Fatalf("second conversation: %+v", f)
		}
		if i > 0 && (f.Type != "error" || f.Code != schema.CodeBraked || f.RetryAfterMS <= 0) {
			t.Fatalf("visitor over the flood threshold: %+v", f)
		}
	}
	other := edgetest.Dial(t, e.Addr, calm.Key, "")
	other.Message(t, "first", "unaffected")
	if f := other.Read(t); f.Type != "ack" {
		t.Fatalf("another site's visitor: %+v", f)
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE client_id IN ('flood')`); n != 0 {
		t.Fatalf("a refused message was stored (%d rows)", n)
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE site_id = ?`, flooded.ID); n != 2 {
		t.Fatalf("flooded site has %d conversations, want 2", n)
	}
}

// A writer that cannot keep up (here the database is locked by another process, as a stuck
// disk would hold it) fills the write queue. Past it each message is refused at once with
// "unavailable", its client id and a retry delay, the socket stays open, nothing refused is
// stored, what was queued is stored once the writer moves again, and a resend is stored once.
func TestFullWriteQueueAnswersUnavailable(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{WriteQueue: 2})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "busy", Origins: []string{"http://site.test"}})
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	c.Message(t, "c-0", "before the stall")
	if f := c.Read(t); f.Type != "ack" {
		t.Fatalf("first message: %+v", f)
	}

	locker, err := sqlite3.Open(e.DataDir + "/" + store.FileName)
	testkit.NoErr(t, err)
	defer locker.Close()
	if err := locker.Exec(`BEGIN IMMEDIATE`); err != nil { // the write lock: the edge's writer waits
		t.Fatal(err)
	}
	const n = 8
	for i := 1; i <= n; i++ {
		c.Message(t, fmt.Sprintf("c-%d", i), fmt.Sprintf("during the stall %d", i))
	}
	// A resume is answered from a reader (not blocked by the lock) after the frames before it:
	// every refusal is in by the time its replay of c-0 arrives.
	c.Send(t, map[string]any{"type": "resume", "after_message_id": 0})
	refused := map[string]bool{}
	for {
		f := c.Read(t)
		if f.Type == "message" && f.Text == "before the stall" {
			break
		}
		if f.Type != "error" || f.Code != schema.CodeUnavailable || f.ClientID == "" || f.RetryAfterMS <= 0 || f.Message == "" {
			t.Fatalf("while the writer is stuck: %+v", f)
		}
		refused[f.ClientID] = true
	}
	if len(refused) == 0 || len(refused) >= n {
		t.Fatalf("refused %d of %d messages with a queue of 2; want some refused and some queued", len(refused), n)
	}
	testkit.NoErr(t, locker.Exec(`ROLLBACK`))
	// The queued ones are acked now; then the refused ones are sent again, as the widget does.
	for i := 0; i < n-len(refused); i++ {
		if f := c.Read(t); f.Type != "ack" || refused[f.ClientID] {
			t.Fatalf("after the stall: %+v", f)
		}
	}
	for id := range refused {
		c.Message(t, id, "during the stall, again")
		if f := c.Read(t); f.Type != "ack" || f.ClientID != id {
			t.Fatalf("resend of %s: %+v", id, f)
		}
	}
	db := edgetest.OpenDB(t, e.DataDir)
	if got := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); got != n+1 {
		t.Fatalf("%d messages stored, want %d (each once)", got, n+1)
	}
}
