package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/brakes"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// Every frame type takes from the connection's bucket, with the same code as a message: a
// socket cannot write emails or read history in a loop.
func TestEveryFrameIsBraked(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{Brakes: brakes.Config{ConnMsgRate: 1, ConnMsgBurst: 3}})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "braked", Origins: []string{"*"}})
	db := edgetest.OpenDB(t, e.DataDir)
	cases := []struct {
		name, frame, answer string
	}{
		{"email", `{"type":"email","email":"v@example.com"}`, "email_saved"},
		{"resume", `{"type":"resume","after_message_id":0}`, "message"},
		{"unknown type", `{"type":"shout"}`, "error"},
		{"not JSON", `{"type":`, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := edgetest.Dial(t, e.Addr, site.Key, "")
			v.Message(t, "first", "hello") // takes one of the 3; email and resume need a conversation
			if f := v.Read(t); f.Type != "ack" {
				t.Fatalf("first message: %+v", f)
			}
			for i := range 2 {
				send(t, v, c.frame)
				if f := v.Read(t); f.Type != c.answer || f.Code == schema.CodeRateLimited {
					t.Fatalf("frame %d within the burst: %+v, want %s", i, f, c.answer)
				}
			}
			send(t, v, c.frame)
			f := v.Read(t)
			if f.Type != "error" || f.Code != schema.CodeRateLimited || f.RetryAfterMS <= 0 || f.RetryAfterMS > 1000 {
				t.Fatalf("frame past the burst: %+v, want rate_limited with retry_after_ms", f)
			}
		})
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM visitors WHERE email = 'v@example.com'`); n != 1 {
		t.Fatalf("%d visitors with the email, want 1", n)
	}

	t.Run("a socket that ignores retry_after_ms is closed", func(t *testing.T) {
		v := edgetest.Dial(t, e.Addr, site.Key, "")
		for range 60 {
			if err := v.WS.WriteMessage(fws.TextMessage, []byte(`{"type":"resume","after_message_id":0}`)); err != nil {
				break // closed already
			}
		}
		for {
			_, err := v.ReadErr(10 * time.Second)
			if err == nil {
				continue
			}
			if !fws.IsCloseError(err, fws.ClosePolicyViolation) {
				t.Fatalf("read: %v, want close 1008", err)
			}
			return
		}
	})
}

// send writes a frame as given (Client.Send marshals its argument).
func send(t *testing.T, c *edgetest.Client, frame string) {
	t.Helper()
	testkit.NoErr(t, c.WS.WriteMessage(fws.TextMessage, []byte(frame)))
}

func TestInvalidUTF8ClosesWith1007(t *testing.T) {
	e, site := startWithSite(t)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	testkit.NoErr(t, c.WS.WriteMessage(fws.TextMessage, []byte("{\"type\":\"message\",\"client_id\":\"u\",\"text\":\"caf\xe9\"}")))
	_, err := c.ReadErr(10 * time.Second)
	if !fws.IsCloseError(err, fws.CloseInvalidFramePayloadData) {
		t.Fatalf("read after invalid UTF-8: %v, want close 1007", err)
	}
	db := edgetest.OpenDB(t, e.DataDir)
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("%d messages stored from an invalid frame", n)
	}
}

// Control characters and bidi overrides are stripped from the text before it is stored
// (so they never reach Slack, webhooks or email); a client id holding one is refused.
func TestControlCharactersNeverStored(t *testing.T) {
	e, site := startWithSite(t)
	db := edgetest.OpenDB(t, e.DataDir)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	c.Message(t, "c1", "pay\x00 \x1b[31minvoice_\u202Egnp.exe\r\nnow\tplease")
	ack := c.Read(t)
	if ack.Type != "ack" {
		t.Fatalf("ack = %+v", ack)
	}
	st, _, err := db.Prepare(`SELECT text FROM messages WHERE id = ?`)
	testkit.NoErr(t, err)
	defer st.Close()
	st.BindInt64(1, ack.MessageID)
	st.Step()
	if got, want := st.ColumnText(0), "pay [31minvoice_gnp.exe\nnow\tplease"; got != want {
		t.Fatalf("stored %q, want %q", got, want)
	}
	for _, tc := range []struct{ name, clientID, text string }{
		{"only controls", "c2", "\x00\x07\u202E"},
		{"control in client_id", "c\x1b3", "hi"},
	} {
		c.Message(t, tc.clientID, tc.text)
		if f := c.Read(t); f.Type != "error" || f.Code != schema.CodeInvalid {
			t.Fatalf("%s: %+v, want invalid", tc.name, f)
		}
	}
}

// A visitor whose client id looks like a Slack reply's still reaches Slack (the source is a
// column, not a prefix), and is not mistaken for the Slack reply with that id.
func TestClientIDCannotClaimASource(t *testing.T) {
	e, site := startWithSite(t)
	db := edgetest.OpenDB(t, e.DataDir)
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	for i := range 2 {
		c.Message(t, fmt.Sprintf("slack:C1:%d", i), "looks like slack")
		if f := c.Read(t); f.Type != "ack" {
			t.Fatalf("ack = %+v", f)
		}
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE source = 'widget' AND client_id LIKE 'slack:%'`); n != 2 {
		t.Fatalf("%d visitor messages stored with source widget, want 2", n)
	}
}

// A visitor sees the client ids of its own messages (its other tabs match them to what they
// sent) and never an operator's.
func TestVisitorSeesOnlyItsOwnClientIDs(t *testing.T) {
	e, site := startWithSite(t)
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{
		Email: "olga@site.test", Name: "Olga", Password: "a long enough password", SiteKeys: []string{site.Key}})
	a := edgetest.Dial(t, e.Addr, site.Key, "")
	a.Message(t, "visitor-1", "hello")
	ack := a.Read(t)
	b := edgetest.Dial(t, e.Addr, site.Key, a.Hello.Visitor) // the visitor's second tab
	a.Message(t, "visitor-2", "second")
	a.Read(t)
	if f := b.Read(t); f.Type != "message" || f.ClientID != "visitor-2" {
		t.Fatalf("the other tab got %+v, want the visitor's message with its client id", f)
	}

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	post := func(path, csrf string, body any) *http.Response {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+e.Addr+"/v1/api"+path, strings.NewReader(string(raw)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		resp, err := hc.Do(req)
		testkit.NoErr(t, err)
		return resp
	}
	resp := post("/login", "", map[string]string{"email": "olga@site.test", "password": "a long enough password"})
	var login struct {
		CSRF string `json:"csrf_token"`
	}
	json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	resp = post(fmt.Sprintf("/conversations/%d/messages", *ack.ConversationID), login.CSRF,
		map[string]string{"text": "operator here", "client_id": "op-secret-id"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("reply: %d", resp.StatusCode)
	}
	for _, tab := range []*edgetest.Client{a, b} {
		if f := tab.Read(t); f.Type != "message" || f.Author != schema.AuthorOperator || f.ClientID != "" {
			t.Fatalf("visitor got %+v, want the operator's message without a client id", f)
		}
	}
	// And on resume.
	c := edgetest.Dial(t, e.Addr, site.Key, a.Hello.Visitor)
	c.Send(t, map[string]any{"type": "resume", "after_message_id": 0})
	for range 3 {
		f := c.Read(t)
		if (f.Author == schema.AuthorOperator) != (f.ClientID == "") {
			t.Fatalf("resumed %+v", f)
		}
	}
}

// A ping gets its pong in order with the socket's other frames (the edge writes every frame
// of a socket from one queue), and the socket goes on.
func TestPingGetsPong(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "ping", Origins: []string{"*"}})
	v := edgetest.Dial(t, e.Addr, site.Key, "")
	pong := make(chan string, 1)
	v.WS.SetPongHandler(func(data string) error { pong <- data; return nil })
	testkit.NoErr(t, v.WS.WriteControl(fws.PingMessage, []byte("are you there"), time.Now().Add(5*time.Second)))
	if _, err := v.SendAck("after-ping", "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-pong:
		if got != "are you there" {
			t.Fatalf("pong %q", got)
		}
	default:
		t.Fatal("the ack came, the pong before it did not")
	}
}

// A first message refused after its admission (here by the site's message cap) opened no
// conversation: the visitor's next message is asked the new-conversation limits again, and
// cannot open one past them.
func TestRefusedFirstMessageSkipsNoBrake(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{Brakes: brakes.Config{IPConvRate: 0.001, IPConvBurst: 2, SiteMsgRate: 0.001, SiteMsgBurst: 2}})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "capped", Origins: []string{"*"}})
	db := edgetest.OpenDB(t, e.DataDir)
	a := edgetest.Dial(t, e.Addr, site.Key, "")
	for _, id := range []string{"a1", "a2"} { // a conversation (one of the network's two) and the site's two messages
		if _, err := a.SendAck(id, "hello"); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	b := edgetest.Dial(t, e.Addr, site.Key, "") // the same network: the second of its two conversations
	b.Message(t, "b1", "hello")
	if f := b.Read(t); f.Type != "error" || f.Code != schema.CodeBraked {
		t.Fatalf("a first message past the site's cap: %+v, want braked", f)
	}
	b.Message(t, "b2", "hello again")
	if f := b.Read(t); f.Type != "error" || f.Code != schema.CodeRateLimited || !strings.Contains(f.Message, "new conversations") {
		t.Fatalf("the next message after a refused first one: %+v, want rate_limited by the network's new conversations", f)
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE site_id = ?`, site.ID); n != 1 {
		t.Fatalf("%d conversations stored, want 1", n)
	}
}
