package worker_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"spookat/loadgen/mock"
	"spookat/schema"
)

// A message with an attachment reaches every target with the file's name, size and signed
// link: a Slack link, a plain link in Discord (which previews it), the webhook's structured
// "file", a line in the email.
func TestAttachmentLinksReachEveryTarget(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	d := mock.NewDiscord(mock.DiscordOptions{})
	ds := httptest.NewServer(d)
	defer ds.Close()
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	be := &smtpBackend{}
	srv := smtp.NewServer(be)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", SlackToken: "xoxb-1", SlackChannel: "C1",
		DiscordWebhook: "https://discord.com/api/webhooks/11/tok", WebhookURL: hooks.URL + "/ok", WebhookSecret: whsec,
		NotifyEmail: "owner@acme.test"})
	cfg := e.config()
	cfg.DiscordAPI = ds.URL + "/api"
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.TLS, cfg.SMTP.From = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port, "none", "spookat@test"
	e.start(cfg)

	file := &schema.File{ID: "Zm9vYmFyYmF6cXV4cXV1eA", Name: "shot|1>.png", Type: "image/png", Size: 48213,
		URL: "https://chat.acme.test/v1/files/Zm9vYmFyYmF6cXV4cXV1eA?exp=1800000000&sig=abc"}
	var jobs []schema.Job
	for _, target := range []string{schema.TargetSlack, schema.TargetDiscord, schema.TargetWebhook, schema.TargetEmail} {
		j := job(target, 1, 7, 1, true, "")
		j.File = file
		jobs = append(jobs, j)
	}
	e.publish(jobs...)
	waitFor(t, 10*time.Second, "four deliveries", func() bool { return len(e.results.final(schema.StatusDelivered)) == 4 })

	t.Run("slack", func(t *testing.T) {
		posts := e.slack.Posts()
		if len(posts) != 1 || !strings.Contains(posts[0].Text, ":paperclip: <"+file.URL+"|shot¦1&gt;.png> (48 KB)") {
			t.Fatalf("%+v", posts)
		}
	})
	t.Run("discord", func(t *testing.T) {
		posts := d.Posts()
		if len(posts) != 1 || !strings.Contains(posts[0].Content, "📎 shot|1>.png (48 KB): "+file.URL) {
			t.Fatalf("%+v", posts)
		}
	})
	t.Run("webhook", func(t *testing.T) {
		evs := rc.Events()
		if len(evs) != 1 || !evs[0].Valid {
			t.Fatalf("%+v", evs)
		}
		var body struct {
			Data struct {
				File *schema.File `json:"file"`
			} `json:"data"`
		}
		if err := json.Unmarshal(evs[0].Body, &body); err != nil || body.Data.File == nil || *body.Data.File != *file {
			t.Fatalf("%s: %v", evs[0].Body, err)
		}
	})
	t.Run("email", func(t *testing.T) {
		be.mu.Lock()
		defer be.mu.Unlock()
		if len(be.mail) != 1 || !bytes.Contains(be.mail[0].data, []byte("Attachment: shot|1>.png (48 KB), for 7 days at")) {
			t.Fatalf("%d mails: %s", len(be.mail), be.mail)
		}
	})
}
