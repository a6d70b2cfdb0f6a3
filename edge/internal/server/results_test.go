package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
)

// A worker identity may publish results, not rewrite the database: results that do not
// match a message the edge published for are refused, counted by reason and never written.
// Each case is followed by a genuine result in a later batch, so when that one is recorded
// the forged one has been judged.
// connectWorker connects to an edge's NATS as a worker, with an identity its authority signs.
func connectWorker(t *testing.T, e *edgetest.Edge, id string) (jetstream.JetStream, *natsauth.Authority) {
	t.Helper()
	auth, err := natsauth.Open(e.DataDir)
	testkit.NoErr(t, err)
	ident, err := auth.Issue(schema.RoleWorker, id)
	testkit.NoErr(t, err)
	nc, err := nats.Connect(e.NATSURL, ident.Options()...)
	testkit.NoErr(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	testkit.NoErr(t, err)
	return js, auth
}

func TestForgedResultsAreRefused(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	slackSite := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "slack", Origins: []string{"http://site.test"},
		SlackToken: "xoxb-1", SlackChannel: "C1"})
	plain := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "plain", Origins: []string{"http://site.test"}})

	send := func(site *store.Site, text string) edgetest.Frame {
		c := edgetest.Dial(t, e.Addr, site.Key, "")
		c.Message(t, "c-"+text, text)
		ack := c.Read(t)
		if ack.Type != "ack" {
			t.Fatalf("ack = %+v", ack)
		}
		return ack
	}
	a := send(slackSite, "a")     // the message forged results are about
	other := send(slackSite, "b") // another conversation of the same site
	p := send(plain, "c")         // a site without Slack

	js, _ := connectWorker(t, e, "forger")
	db := edgetest.OpenDB(t, e.DataDir)

	good := func(m edgetest.Frame, site *store.Site) schema.Result {
		return schema.Result{JobID: schema.JobID(m.MessageID, schema.TargetSlack), Target: schema.TargetSlack, SiteID: site.ID,
			ConversationID: *m.ConversationID, MessageID: m.MessageID, Status: schema.StatusRetrying, Attempts: 1, At: time.Now()}
	}
	publish := func(rs ...schema.Result) {
		t.Helper()
		var b []byte
		for _, r := range rs {
			line, _ := json.Marshal(r)
			b = append(append(b, line...), '\n')
		}
		if _, err := js.Publish(context.Background(), schema.ResultSubject("forger"), b); err != nil {
			t.Fatal(err)
		}
	}
	// The barrier: a genuine result for `other`, its attempts counting up per case.
	attempts := int64(1)
	barrier := func() {
		t.Helper()
		attempts++
		r := good(other, slackSite)
		r.Attempts = int(attempts)
		publish(r)
		testkit.WaitFor(t, "the genuine result recorded", 10*time.Second, func() bool {
			return edgetest.QueryInt(t, db, `SELECT coalesce(max(attempts), 0) FROM deliveries WHERE message_id = ?`, other.MessageID) == attempts
		})
	}
	barrier()

	for _, tc := range []struct {
		reason string
		forge  func(r *schema.Result)
	}{
		{"site_mismatch", func(r *schema.Result) { r.SiteID = plain.ID }},
		{"conversation_mismatch", func(r *schema.Result) { r.ConversationID = *other.ConversationID }},
		{"unknown_message", func(r *schema.Result) {
			r.MessageID = 999_999
			r.JobID = schema.JobID(r.MessageID, r.Target)
		}},
		{"target_not_configured", func(r *schema.Result) {
			*r = good(p, plain) // plain has no Slack
		}},
		{"malformed", func(r *schema.Result) { r.Status = "owned" }},
		{"malformed", func(r *schema.Result) { r.JobID = schema.JobID(other.MessageID, r.Target) }},
		{"malformed", func(r *schema.Result) { r.ThreadID = "1.0 OR 1=1; --" }},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			series := fmt.Sprintf(`spookat_results_rejected_total{reason=%q}`, tc.reason)
			before, _ := edgetest.Metric(e.MetricsAddr, series)
			r := good(a, slackSite)
			r.Status, r.Error, r.ThreadID = schema.StatusDead, "forged: "+tc.reason, "1700000000.000100"
			tc.forge(&r)
			publish(r)
			barrier()
			if after, _ := edgetest.Metric(e.MetricsAddr, series); after != before+1 {
				t.Fatalf("%s = %v, want %v", series, after, before+1)
			}
			if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM deliveries WHERE message_id IN (?, ?, ?) OR last_error LIKE 'forged%'`,
				a.MessageID, p.MessageID, 999_999); n != 0 {
				t.Fatalf("%d forged delivery rows written", n)
			}
			if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE slack_thread != ''`); n != 0 {
				t.Fatalf("a forged result set %d conversations' Slack thread", n)
			}
		})
	}
	// A line that is not a result at all is refused too, and the batch's good lines pass.
	before, _ := edgetest.Metric(e.MetricsAddr, `spookat_results_rejected_total{reason="malformed"}`)
	if _, err := js.Publish(context.Background(), schema.ResultSubject("forger"), []byte("{not json\n")); err != nil {
		t.Fatal(err)
	}
	barrier()
	if after, _ := edgetest.Metric(e.MetricsAddr, `spookat_results_rejected_total{reason="malformed"}`); after != before+1 {
		t.Fatalf("unreadable line: malformed %v → %v", before, after)
	}
}
