package server_test

import (
	"strconv"
	"testing"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// The transcript frame is answered in turn: no address, then not closed, are invalid with a
// sentence; once an operator closed the conversation, transcript_sent (and a system message
// of kind transcript in the conversation, whose job is the email); asked again at once,
// rate_limited.
func TestTranscriptFrame(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "tx", Origins: []string{"http://site.test"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "rui@tx.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	ack, err := c.SendAck("c1", "Where is my refund?")
	if err != nil {
		t.Fatal(err)
	}
	ask := func(code string) edgetest.Frame {
		t.Helper()
		c.Send(t, map[string]string{"type": "transcript"})
		f := c.Read(t)
		if code != "" && (f.Type != "error" || f.Code != code || f.Message == "") {
			t.Fatalf("transcript: %+v, want error %s", f, code)
		}
		return f
	}
	ask(schema.CodeInvalid) // no address yet
	c.Send(t, map[string]string{"type": "email", "email": "ada@example.com"})
	if f := c.Read(t); f.Type != "email_saved" {
		t.Fatalf("email: %+v", f)
	}
	ask(schema.CodeInvalid) // open
	in := edgetest.Login(t, e.Addr, "rui@tx.test", "correct horse battery").NewToken(t)
	if st := in.Do(t, "POST", "/conversations/"+strconv.FormatInt(*ack.ConversationID, 10)+"/close", nil, nil); st != 200 {
		t.Fatalf("close: %d", st)
	}
	if f := c.Read(t); f.Type != "conversation" {
		t.Fatalf("after the close: %+v", f)
	}
	if f := ask(""); f.Type != "transcript_sent" {
		t.Fatalf("transcript: %+v", f)
	}
	if f := ask(schema.CodeRateLimited); f.RetryAfterMS <= 0 {
		t.Fatalf("again: %+v", f)
	}
	db := edgetest.OpenDB(t, e.DataDir)
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE kind = 'transcript' AND author = 'system' AND conversation_id = ?`, *ack.ConversationID); n != 1 {
		t.Fatalf("%d transcript messages", n)
	}
}
