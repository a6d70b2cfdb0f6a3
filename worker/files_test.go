package worker_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

// A first message with an attachment and the visitor's context reaches every target with
// the file's name, size and signed link (a Slack link, a plain link in Discord, which previews
// it, the webhook's structured "file", a line in the email) and where the visitor started
// (the page as a link, browser, language, time zone, referrer's host; the webhook's "context").
func TestAttachmentAndContextReachEveryTarget(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	d := mock.NewDiscord(mock.DiscordOptions{})
	ds := httptest.NewServer(d)
	defer ds.Close()
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	be, smtpPort := startSMTP(t)
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", SlackToken: "xoxb-1", SlackChannel: "C1",
		DiscordWebhook: "https://discord.com/api/webhooks/11/tok", WebhookURL: hooks.URL + "/ok", WebhookSecret: whsec,
		NotifyEmail: "owner@acme.test"})
	cfg := e.config()
	cfg.DiscordAPI = ds.URL + "/api"
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.TLS, cfg.SMTP.From = "127.0.0.1", smtpPort, "none", "spookat@test"
	e.start(cfg)

	file := &schema.File{ID: "Zm9vYmFyYmF6cXV4cXV1eA", Name: "shot|1>.png", Type: "image/png", Size: 48213,
		URL: "https://chat.acme.test/v1/files/Zm9vYmFyYmF6cXV4cXV1eA?exp=1800000000&sig=abc"}
	vc := &schema.VisitorContext{URL: "https://acme.test/pricing?a=1&b=<2>|3", Title: "Pricing <Acme>", Referrer: "https://www.google.com/search?q=x",
		Language: "de-DE", TimeZone: "Europe/Berlin", UserAgent: "Mozilla/5.0 ...", Browser: "Firefox 133 on Windows", At: 1800000000000}
	var jobs []schema.Job
	for _, target := range []string{schema.TargetSlack, schema.TargetDiscord, schema.TargetWebhook, schema.TargetEmail} {
		j := job(target, 1, 7, 1, true, "")
		j.File, j.Context = file, vc
		jobs = append(jobs, j)
	}
	e.publish(jobs...)
	testkit.WaitFor(t, "four deliveries", 10*time.Second, func() bool { return len(e.results.final(schema.StatusDelivered)) == 4 })

	t.Run("slack", func(t *testing.T) {
		posts := e.slack.Posts()
		if len(posts) != 1 || !strings.Contains(posts[0].Text, ":paperclip: <"+file.URL+"|shot¦1&gt;.png> (48 KB)") {
			t.Fatalf("%+v", posts)
		}
		page := ":globe_with_meridians: <https://acme.test/pricing?a=1&amp;b=%3C2%3E%7C3|Pricing &lt;Acme&gt;> · Firefox 133 on Windows · de-DE · Europe/Berlin · from www.google.com\n"
		if !strings.Contains(posts[0].Text, page) {
			t.Fatalf("the parent post has no context line %q:\n%s", page, posts[0].Text)
		}
	})
	t.Run("discord", func(t *testing.T) {
		posts := d.Posts()
		if len(posts) != 1 || !strings.Contains(posts[0].Content, "📎 shot|1>.png (48 KB): "+file.URL) {
			t.Fatalf("%+v", posts)
		}
		page := "🌐 Pricing <Acme> <https://acme.test/pricing?a=1&b=<2%3E|3> · Firefox 133 on Windows · de-DE · Europe/Berlin · from www.google.com\n"
		if !strings.Contains(posts[0].Content, page) {
			t.Fatalf("the first post has no context line %q:\n%s", page, posts[0].Content)
		}
	})
	t.Run("webhook", func(t *testing.T) {
		evs := rc.Events()
		if len(evs) != 1 || !evs[0].Valid {
			t.Fatalf("%+v", evs)
		}
		var body struct {
			Data struct {
				File    *schema.File           `json:"file"`
				Context *schema.VisitorContext `json:"context"`
			} `json:"data"`
		}
		if err := json.Unmarshal(evs[0].Body, &body); err != nil || body.Data.File == nil || *body.Data.File != *file ||
			body.Data.Context == nil || *body.Data.Context != *vc {
			t.Fatalf("%s: %v", evs[0].Body, err)
		}
	})
	t.Run("email", func(t *testing.T) {
		mails := be.Mails()
		if len(mails) != 1 || !bytes.Contains(mails[0].Data, []byte("Attachment: shot|1>.png (48 KB), for 7 days at")) ||
			!bytes.Contains(mails[0].Data, []byte("Started on: https://acme.test/pricing")) {
			t.Fatalf("%d mails: %v", len(mails), mails)
		}
	})
}

// A transcript job mails the conversation to the visitor (To), whether or not the site has a
// notify address: every line with who wrote it and when, an attachment by name, and how many
// earlier messages were left out.
func TestTranscriptEmail(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	be, smtpPort := startSMTP(t)
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme"}) // no notify address
	cfg := e.config()
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.TLS, cfg.SMTP.From = "127.0.0.1", smtpPort, "none", "spookat@test"
	e.start(cfg)
	at := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	j := job(schema.TargetEmail, 1, 9, 12, false, "Transcript emailed to ada@example.com")
	j.Author, j.Name, j.Kind, j.To = schema.AuthorSystem, "Transcript", schema.KindTranscript, "ada@example.com"
	j.Transcript = &schema.Transcript{Earlier: 3, Lines: []schema.TranscriptLine{
		{Author: schema.AuthorVisitor, Text: "Where is my refund?", At: at},
		{Author: schema.AuthorOperator, Name: "Rui", Text: "Sent today.", At: at.Add(time.Minute)},
		{Author: schema.AuthorVisitor, File: "receipt.pdf", At: at.Add(2 * time.Minute)},
	}}
	e.publish(j)
	testkit.WaitFor(t, "the transcript mail", 10*time.Second, func() bool {
		return len(be.Mails()) == 1
	})
	m := be.Mails()[0]
	if len(m.To) != 1 || m.To[0] != "ada@example.com" {
		t.Fatalf("to %v", m.To)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(m.Data)))
	for _, want := range []string{"Subject: Your conversation with Acme", "3 earlier messages", "4 Dec 09:30 UTC · You:", "Where is my refund?",
		"4 Dec 09:31 UTC · Rui:", "Sent today.", "[attachment: receipt.pdf]"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("mail lacks %q:\n%s", want, body)
		}
	}
}

// An invitation's job mails the invitee (To) their link, belongs to no conversation, and its
// result names the invitation instead of a message.
func TestInviteEmail(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	be, smtpPort := startSMTP(t)
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme"})
	results := e.results
	cfg := e.config()
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.TLS, cfg.SMTP.From = "127.0.0.1", smtpPort, "none", "spookat@test"
	e.start(cfg)
	expires := time.Date(2026, 12, 9, 9, 30, 0, 0, time.UTC)
	e.publish(schema.Job{ID: schema.InviteJobID(7), Lane: schema.LaneEmail, Target: schema.TargetEmail, SiteID: 1, To: "zoe@example.com",
		CreatedAt: time.Now(), Invite: &schema.Invite{ID: 7, Site: "Acme", By: "Ann", Role: "agent", Link: "https://chat.example/app/#/invite/tok3n", Expires: expires}})
	testkit.WaitFor(t, "the invitation's mail and its result", 10*time.Second, func() bool {
		return len(be.Mails()) == 1 && len(results.final(schema.StatusDelivered)) == 1
	})
	m := be.Mails()[0]
	if len(m.To) != 1 || m.To[0] != "zoe@example.com" {
		t.Fatalf("to %v", m.To)
	}
	body, _ := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(m.Data)))
	for _, want := range []string{"Subject: Join Acme on spookat", "Ann invited you", "as agent", "https://chat.example/app/#/invite/tok3n", "Wed 9 Dec 09:30 UTC"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("mail lacks %q:\n%s", want, body)
		}
	}
	if r := results.of(schema.InviteJobID(7)); len(r) != 1 || r[0].InviteID != 7 || r[0].MessageID != 0 {
		t.Fatalf("results %+v; want one naming invitation 7", r)
	}
}
