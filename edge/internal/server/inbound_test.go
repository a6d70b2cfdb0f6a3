package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// INBOUND (issue 37, point 1): a worker publishes what it heard from Discord on its own
// subject; the edge records it through the writer and the visitor gets it live. The
// conversation is found from the thread the worker's result recorded, or from a post of the
// conversation a reply answers, never from the event; a resend stores nothing new; a status
// command changes the status; an event for another site's thread, a malformed one, or one
// for a site without Discord replies is dropped and counted; a worker may publish only on
// its own subject.
func TestInboundDiscordReplies(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	discord := func(name, token string) *store.Site {
		return edgetest.AddSite(t, e.DataDir, &store.Site{Name: name, Origins: []string{"http://site.test"},
			DiscordWebhook: "https://discord.com/api/webhooks/4242/" + name, DiscordBotToken: token})
	}
	site := discord("forum", "bot-token-of-the-forum-site-0123456789")
	other := discord("other", "bot-token-of-the-other-site-0123456789")
	noBot := discord("nobot", "")

	visitor := edgetest.Dial(t, e.Addr, site.Key, "")
	ack, err := visitor.SendAck("v-1", "Is anyone on Discord?")
	testkit.NoErr(t, err)
	conv := *ack.ConversationID
	otherAck, err := edgetest.Dial(t, e.Addr, other.Key, "").SendAck("o-1", "hello")
	testkit.NoErr(t, err)

	js, _ := connectWorker(t, e, "w1")
	db := edgetest.OpenDB(t, e.DataDir)
	ctx := context.Background()
	// The worker's results: the first post opened thread 7001 (other's: 7002); message 5001
	// is its id in Discord.
	for _, r := range []struct {
		site            *store.Site
		ack             edgetest.Frame
		thread, message string
	}{{site, ack, "7001", "5001"}, {other, otherAck, "7002", "5002"}} {
		res := schema.Result{JobID: schema.JobID(r.ack.MessageID, schema.TargetDiscord), Target: schema.TargetDiscord, SiteID: r.site.ID,
			ConversationID: *r.ack.ConversationID, MessageID: r.ack.MessageID, Status: schema.StatusDelivered, Attempts: 1,
			ExternalID: r.message, ThreadID: r.thread, At: time.Now()}
		line, _ := json.Marshal(res)
		_, err := js.Publish(ctx, schema.ResultSubject("w1"), append(line, '\n'))
		testkit.NoErr(t, err)
	}
	testkit.WaitFor(t, "the Discord threads recorded", 10*time.Second, func() bool {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE discord_thread IN ('7001', '7002')`) == 2
	})

	outcome := func(o string) float64 {
		v, _ := edgetest.Metric(e.MetricsAddr, fmt.Sprintf(`spookat_inbound_total{outcome=%q}`, o))
		return v
	}
	publish := func(in schema.Inbound) {
		t.Helper()
		b, _ := json.Marshal(in)
		_, err := js.Publish(ctx, schema.InboundSubject("w1"), b) // no Nats-Msg-Id: the edge's own dedupe is tested
		testkit.NoErr(t, err)
	}
	expect := func(what, o string, in schema.Inbound) {
		t.Helper()
		before := outcome(o)
		publish(in)
		testkit.WaitFor(t, what, 10*time.Second, func() bool { return outcome(o) == before+1 })
	}
	reply := schema.Inbound{ID: "discord:7001:9001", Source: schema.SourceDiscord, SiteID: site.ID, Thread: "7001",
		Author: "Dana", Text: "Hi! Dana from support, on Discord.", At: time.Now()}

	t.Run("a reply in the thread reaches the visitor", func(t *testing.T) {
		expect("recorded", "recorded", reply)
		f := readUntil(t, visitor, func(f edgetest.Frame) bool { return f.Type == "message" && f.Author == schema.AuthorOperator })
		if f.Name != "Dana" || f.Text != reply.Text {
			t.Fatalf("the visitor got %+v", f)
		}
		// Stored as Discord's: its jobs do not post it back to Discord.
		if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE source = 'discord' AND client_id = ? AND conversation_id = ?`, reply.ID, conv); n != 1 {
			t.Fatalf("%d stored", n)
		}
	})
	t.Run("a resend is stored once", func(t *testing.T) {
		expect("duplicate", "duplicate", reply)
		if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE client_id = ?`, reply.ID); n != 1 {
			t.Fatalf("%d stored", n)
		}
	})
	t.Run("a Discord reply to one of its posts", func(t *testing.T) {
		r := reply
		r.ID, r.Thread, r.ReplyTo, r.Text = "discord:1:9002", "", "5001", "And a reply in the channel."
		expect("recorded", "recorded", r)
		f := readUntil(t, visitor, func(f edgetest.Frame) bool { return f.Type == "message" && f.Author == schema.AuthorOperator })
		if f.Text != r.Text {
			t.Fatalf("the visitor got %+v", f)
		}
	})
	t.Run("a file fetched from Discord", func(t *testing.T) {
		objects, err := js.ObjectStore(ctx, schema.BucketInboundFiles)
		testkit.NoErr(t, err)
		pdf := []byte("%PDF-1.4 the receipt")
		_, err = objects.PutBytes(ctx, "discord:7001:9010:1", pdf)
		testkit.NoErr(t, err)
		r := reply
		r.ID, r.Text, r.File = "discord:7001:9010:1", "", &schema.InboundFile{Object: "discord:7001:9010:1", Name: "receipt.pdf", Type: "application/pdf", Size: int64(len(pdf))}
		expect("recorded", "recorded", r)
		f := readUntil(t, visitor, func(f edgetest.Frame) bool { return f.Type == "message" && f.File != nil })
		if f.File.Name != "receipt.pdf" || f.File.Size != int64(len(pdf)) || f.Name != "Dana" {
			t.Fatalf("the visitor got %+v (file %+v)", f, f.File)
		}
		if _, err := objects.GetInfo(ctx, "discord:7001:9010:1"); err == nil {
			t.Error("the object is still in INBOUND_FILES after the edge took it")
		}
		// Refused as an operator's upload would be (HTML), and the object gone too; one
		// never put (expired) is refused.
		_, err = objects.PutBytes(ctx, "discord:7001:9011:1", []byte("<!doctype html><script>alert(1)</script>"))
		testkit.NoErr(t, err)
		r.ID, r.File = "discord:7001:9011:1", &schema.InboundFile{Object: "discord:7001:9011:1", Name: "x.png", Type: "image/png", Size: 40}
		expect("refused", "refused", r)
		if _, err := objects.GetInfo(ctx, "discord:7001:9011:1"); err == nil {
			t.Error("a refused file's object is still in INBOUND_FILES")
		}
		r.ID, r.File = "discord:7001:9012:1", &schema.InboundFile{Object: "discord:7001:9012:1", Name: "y.pdf", Size: 10}
		expect("refused", "refused", r)
	})
	t.Run("/close closes it", func(t *testing.T) {
		r := reply
		r.ID, r.Text, r.Kind = "discord:7001:9003", "", schema.KindClosed
		expect("recorded", "recorded", r)
		if st := edgetest.QueryInt(t, db, `SELECT status = 'closed' FROM conversations WHERE id = ?`, conv); st != 1 {
			t.Fatal("not closed")
		}
		r.ID = "discord:7001:9004"
		expect("unchanged", "unchanged", r)
	})
	for _, c := range []struct {
		name, outcome string
		forge         func(in *schema.Inbound)
	}{
		{"another site's thread", "not_ours", func(in *schema.Inbound) { in.Thread = "7002" }},
		{"another site's post", "not_ours", func(in *schema.Inbound) { in.Thread, in.ReplyTo = "", "5002" }},
		{"a thread of nobody's", "not_ours", func(in *schema.Inbound) { in.Thread = "123" }},
		{"a site without Discord replies", "refused", func(in *schema.Inbound) { in.SiteID = noBot.ID }},
		{"no text", "refused", func(in *schema.Inbound) { in.Text = "" }},
		{"another source", "refused", func(in *schema.Inbound) { in.Source = schema.SourceSlack }},
		{"nowhere", "refused", func(in *schema.Inbound) { in.Thread = "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := reply
			in.ID = "discord:x:" + strings.ReplaceAll(c.name, " ", "-")
			c.forge(&in)
			expect(c.outcome, c.outcome, in)
			if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE client_id = ?`, in.ID); n != 0 {
				t.Fatalf("%d stored", n)
			}
		})
	}
	t.Run("not junk either", func(t *testing.T) {
		before := outcome("refused")
		_, err := js.Publish(ctx, schema.InboundSubject("w1"), []byte("{not json"))
		testkit.NoErr(t, err)
		testkit.WaitFor(t, "refused", 10*time.Second, func() bool { return outcome("refused") == before+1 })
	})
	t.Run("a worker publishes on its own subject only", func(t *testing.T) {
		b, _ := json.Marshal(reply)
		_, err := js.Publish(ctx, schema.InboundSubject("w2"), b, jetstream.WithRetryAttempts(0))
		if err == nil {
			t.Fatal("worker w1 published on w2's subject")
		}
	})
}

// readUntil reads the visitor's frames until one matches.
func readUntil(t *testing.T, c *edgetest.Client, match func(edgetest.Frame) bool) edgetest.Frame {
	t.Helper()
	for {
		if f := c.Read(t); match(f) {
			return f
		}
	}
}
