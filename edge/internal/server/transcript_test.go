package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
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
	testkit.NoErr(t, err)
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

	// transcript_sent says the email is on its way; the window hears how it ended: nothing
	// while the worker retries, failed once it gives up, delivered when it got through.
	txID := edgetest.QueryInt(t, db, `SELECT id FROM messages WHERE kind = 'transcript' AND conversation_id = ?`, *ack.ConversationID)
	js, _ := connectWorker(t, e, "mailer")
	result := func(status schema.DeliveryStatus, attempts int) {
		t.Helper()
		b, _ := json.Marshal(schema.Result{JobID: schema.JobID(txID, schema.TargetEmail), Target: schema.TargetEmail, SiteID: site.ID,
			ConversationID: *ack.ConversationID, MessageID: txID, Status: status, Attempts: attempts, Error: "dial tcp: connection refused", At: time.Now()})
		if _, err := js.Publish(context.Background(), schema.ResultSubject("mailer"), append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	result(schema.StatusRetrying, 1)
	result(schema.StatusDead, 5)
	if f := c.Read(t); f.Type != "transcript_delivery" || f.Status != "failed" {
		t.Fatalf("after the retries and the dead letter: %+v, want transcript_delivery failed (and nothing for the retry)", f)
	}
	result(schema.StatusDelivered, 6) // asked again and sent
	if f := c.Read(t); f.Type != "transcript_delivery" || f.Status != "delivered" {
		t.Fatalf("after delivery: %+v", f)
	}
}
