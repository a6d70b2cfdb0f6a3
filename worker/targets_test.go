package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestWebhooksSignedRetriedAndDead(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, WebhookURL: hooks.URL + "/ok", WebhookSecret: whsec})
	e.putSite(schema.SiteDelivery{SiteID: 2, WebhookURL: hooks.URL + "/flaky/1", WebhookSecret: whsec})
	e.putSite(schema.SiteDelivery{SiteID: 3, WebhookURL: hooks.URL + "/status/404", WebhookSecret: whsec})
	e.putSite(schema.SiteDelivery{SiteID: 4, WebhookURL: hooks.URL + "/ok", WebhookSecret: "whsec_d3Jvbmc="}) // not the receiver's
	cfg := e.config()
	cfg.MaxAttempts = 3
	e.start(cfg)

	ok1 := job(schema.TargetWebhook, 1, 1, 1, true, marker(1, 0))
	ok2 := job(schema.TargetWebhook, 1, 1, 2, false, marker(1, 1))
	flaky := job(schema.TargetWebhook, 2, 2, 3, true, "flaky")
	gone := job(schema.TargetWebhook, 3, 3, 4, true, "gone")
	wrong := job(schema.TargetWebhook, 4, 4, 5, true, "wrong secret")
	e.publish(ok1, ok2, flaky, gone, wrong)

	testkit.WaitFor(t, "webhook outcomes", 10*time.Second, func() bool {
		return len(e.results.final(schema.StatusDelivered)) == 3 && len(e.results.final(schema.StatusDead)) == 2
	})
	evs := rc.Events()
	var okIDs []string
	for _, ev := range evs {
		if ev.Path == "/ok" && ev.Valid {
			okIDs = append(okIDs, ev.ID)
			var body struct {
				Type string `json:"type"`
				Data struct {
					MessageID int64  `json:"message_id"`
					Text      string `json:"text"`
				} `json:"data"`
			}
			if err := json.Unmarshal(ev.Body, &body); err != nil || body.Type != "message.created" {
				t.Errorf("event body %s: %v", ev.Body, err)
			}
		}
	}
	if strings.Join(okIDs, ",") != ok1.ID+","+ok2.ID {
		t.Errorf("valid /ok events %v, want the two jobs in order", okIDs)
	}
	// 500 then 200: two attempts, one success recorded.
	var flakyStatus []int
	for _, ev := range evs {
		if ev.ID == flaky.ID {
			flakyStatus = append(flakyStatus, ev.Status)
		}
	}
	if len(flakyStatus) != 2 || flakyStatus[0] != 500 || flakyStatus[1] != 200 {
		t.Errorf("flaky receiver saw %v", flakyStatus)
	}
	if n := e.results.final(schema.StatusDelivered)[flaky.ID]; n != 1 {
		t.Errorf("flaky job: %d delivered results", n)
	}
	// 404 is permanent: one attempt, then DEAD. A bad signature (401) too.
	dead := e.deadJobs()
	got := map[string]string{}
	for _, m := range dead {
		var j schema.Job
		_ = json.Unmarshal(m.Data, &j)
		got[j.ID] = m.Header.Get(schema.HeaderError)
	}
	if got[gone.ID] != "webhook: http 404" || got[wrong.ID] != "webhook: http 401" || len(got) != 2 {
		t.Errorf("DEAD: %v", got)
	}
	n404 := 0
	for _, ev := range evs {
		if ev.ID == gone.ID {
			n404++
		}
	}
	if n404 != 1 {
		t.Errorf("404 receiver got %d attempts, want 1", n404)
	}
}

func TestDiscordWebhookRateLimits(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	d := mock.NewDiscord(mock.DiscordOptions{Limit: 2, Window: 300 * time.Millisecond})
	ds := httptest.NewServer(d)
	defer ds.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", DiscordWebhook: "https://discord.com/api/webhooks/11/tok"})
	e.putSite(schema.SiteDelivery{SiteID: 2, DiscordWebhook: "https://discord.com/api/webhooks/404/tok"})
	cfg := e.config()
	cfg.DiscordAPI = ds.URL + "/api"
	e.start(cfg)
	var jobs []schema.Job
	for k := range 7 {
		jobs = append(jobs, job(schema.TargetDiscord, 1, 5, int64(k+1), k == 0, marker(5, k)))
	}
	jobs = append(jobs, job(schema.TargetDiscord, 2, 6, 100, true, "x"))
	e.publish(jobs...)
	testkit.WaitFor(t, "discord results", 15*time.Second, func() bool {
		return len(e.results.final(schema.StatusDelivered)) == 7 && len(e.results.final(schema.StatusDead)) == 1
	})
	posts := d.Posts()
	var seq []int
	for _, p := range posts {
		if !strings.HasPrefix(p.Content, "**#5") {
			t.Errorf("post without the conversation header: %q", p.Content)
		}
		for _, m := range markerRE.FindAllStringSubmatch(p.Content, -1) {
			seq = append(seq, int(m[2][0]-'0'))
		}
	}
	checkOrder(t, 5, seq, 7)
	if !strings.Contains(posts[0].Content, "new conversation on Acme") {
		t.Errorf("first post %q", posts[0].Content)
	}
	if rs := e.results.of(jobs[0].ID); rs[len(rs)-1].ExternalID != posts[0].ID {
		t.Errorf("result external id %+v, post id %s", rs, posts[0].ID)
	}
	// The limit (2 per 300 ms) was announced in the headers and honoured: no 429 needed.
	if d.RateLimited() != 0 {
		t.Errorf("%d 429s: the worker ignored X-RateLimit-Remaining", d.RateLimited())
	}
	// The webhook URL is a secret (its path holds the token): the error says the status and
	// Discord's code, nothing of the URL or the answer's text.
	dead := e.deadJobs()
	if len(dead) != 1 || dead[0].Header.Get(schema.HeaderError) != "discord: http 404 (code 10015)" {
		t.Fatalf("DEAD %d, error %q", len(dead), dead[0].Header.Get(schema.HeaderError))
	}
	if r := e.results.of(jobs[7].ID); r[len(r)-1].Error != "discord: http 404 (code 10015)" {
		t.Errorf("dead result error %q", r[len(r)-1].Error)
	}
}

// TestPrivateTargetsRefused: without -allow-private-targets a site cannot make the worker
// reach this host. URLs that name it are refused before any connection; a Discord webhook
// whose address turns out to be loopback at connect time (here through -discord-api, as
// a rebinding name would) is refused by the dialer. Every job goes to DEAD at once with the
// reason, never the URL's path or token; no mock hears a thing.
func TestPrivateTargetsRefused(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	d := mock.NewDiscord(mock.DiscordOptions{Limit: 1000, Window: time.Second})
	ds := httptest.NewServer(d)
	defer ds.Close()
	_, port, _ := net.SplitHostPort(hooks.Listener.Addr().String())
	cases := []struct {
		d    schema.SiteDelivery
		want string
	}{
		{schema.SiteDelivery{WebhookURL: hooks.URL + "/ok?key=SECRET"}, "webhook: refused: the URL must start with https://"},
		{schema.SiteDelivery{WebhookURL: "https://127.0.0.1:" + port + "/ok?key=SECRET"}, "webhook: refused: the URL must not point at a non-public address (address 127.0.0.1 is loopback)"},
		{schema.SiteDelivery{WebhookURL: "https://localhost:" + port + "/ok?key=SECRET"}, "webhook: refused: the URL must not point at localhost"},
		{schema.SiteDelivery{WebhookURL: "https://[::ffff:169.254.169.254]/latest/meta-data/"}, "webhook: refused: the URL must not point at a non-public address (address ::ffff:169.254.169.254 is cloud metadata)"},
		{schema.SiteDelivery{DiscordWebhook: "https://discord.com/api/webhooks/11/SECRET"}, "discord: refused: address 127.0.0.1 is loopback"},
		{schema.SiteDelivery{DiscordWebhook: ds.URL + "/api/webhooks/11/SECRET"}, "discord: refused: the webhook URL must start with https://"},
	}
	var jobs []schema.Job
	for i, tc := range cases {
		site := int64(i + 1)
		tc.d.SiteID, tc.d.WebhookSecret = site, whsec
		e.putSite(tc.d)
		target := schema.TargetWebhook
		if tc.d.DiscordWebhook != "" {
			target = schema.TargetDiscord
		}
		jobs = append(jobs, job(target, site, site, site, true, "x"))
	}
	cfg := e.config()
	cfg.AllowPrivateTargets = false
	cfg.DiscordAPI = ds.URL + "/api"
	e.start(cfg)
	e.publish(jobs...)
	testkit.WaitFor(t, "dead results", 10*time.Second, func() bool { return len(e.results.final(schema.StatusDead)) == len(jobs) })
	for i, j := range jobs {
		rs := e.results.of(j.ID)
		if got := rs[len(rs)-1]; got.Error != cases[i].want || got.Attempts != 1 {
			t.Errorf("site %d: %d attempts, error %q, want 1 and %q", j.SiteID, got.Attempts, got.Error, cases[i].want)
		}
	}
	for _, m := range e.deadJobs() {
		if h := m.Header.Get(schema.HeaderError); strings.Contains(h, "SECRET") || strings.Contains(h, "/api") {
			t.Errorf("DEAD error %q holds the URL", h)
		}
	}
	if n := len(rc.Events()) + len(d.Posts()); n != 0 {
		t.Errorf("%d requests reached the mocks", n)
	}
}

// startSMTP runs a real SMTP server (loadgen/mock) on a loopback port until the test ends.
func startSMTP(t *testing.T) (*mock.SMTP, int) {
	t.Helper()
	srv, err := mock.StartSMTP()
	testkit.NoErr(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv, srv.Port
}

func TestEmailOnNewConversation(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	be, smtpPort := startSMTP(t)
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", NotifyEmail: "owner@acme.test"})
	e.putSite(schema.SiteDelivery{SiteID: 2, Name: "Gone", NotifyEmail: "nobody@acme.test"})
	cfg := e.config()
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.TLS, cfg.SMTP.From = "127.0.0.1", smtpPort, "none", "spookat@test"
	e.start(cfg)
	j := job(schema.TargetEmail, 1, 9, 1, true, "Do you ship to Mars?")
	j.Name = "Zoe"
	e.publish(j, job(schema.TargetEmail, 2, 10, 2, true, "x"))
	testkit.WaitFor(t, "a mail and a dead job", 10*time.Second, func() bool {
		return len(be.Mails()) == 1 && len(e.results.final(schema.StatusDead)) == 1
	})
	m := be.Mails()[0]
	if m.From != "spookat@test" || len(m.To) != 1 || m.To[0] != "owner@acme.test" {
		t.Errorf("envelope %q → %v", m.From, m.To)
	}
	for _, want := range []string{"Subject: New conversation on Acme", "Zoe started conversation #9", "Do you ship to Mars?", "/inbox/c/9"} {
		if !bytes.Contains(m.Data, []byte(want)) {
			t.Errorf("mail lacks %q:\n%s", want, m.Data)
		}
	}
	testkit.WaitFor(t, "delivered result", 5*time.Second, func() bool { return e.results.final(schema.StatusDelivered)[j.ID] == 1 })
}

// The worker never opens the database: no SQLite driver among its packages' dependencies.
func TestNoSQLiteDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "spookat/worker/...").CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		t.Skipf("go tool not available: %v", err)
	}
	if !strings.Contains(string(out), "github.com/nats-io/nats.go/jetstream") {
		t.Fatalf("go list output looks wrong:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(strings.ToLower(line), "sqlite") {
			t.Errorf("worker depends on %s", line)
		}
	}
}

// An email job with To carries an operator's reply to a visitor who left an address.
func TestEmailReplyToVisitor(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	be, smtpPort := startSMTP(t)
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme"}) // no notify address: replies still go
	cfg := e.config()
	cfg.SMTP.Host, cfg.SMTP.Port, cfg.SMTP.TLS, cfg.SMTP.From = "127.0.0.1", smtpPort, "none", "spookat@test"
	e.start(cfg)
	j := job(schema.TargetEmail, 1, 9, 5, false, "Yes, we ship to Mars.")
	j.Author, j.Name, j.To = "operator", "Ann", "zoe@visitor.test"
	e.publish(j)
	testkit.WaitFor(t, "the reply mailed and recorded", 10*time.Second, func() bool {
		return len(be.Mails()) == 1 && e.results.final(schema.StatusDelivered)[j.ID] == 1
	})
	m := be.Mails()[0]
	if len(m.To) != 1 || m.To[0] != "zoe@visitor.test" {
		t.Errorf("envelope → %v, want the visitor", m.To)
	}
	for _, want := range []string{"Subject: Reply from Acme", "Ann answered your message on Acme", "Yes, we ship to Mars."} {
		if !bytes.Contains(m.Data, []byte(want)) {
			t.Errorf("mail lacks %q:\n%s", want, m.Data)
		}
	}
}

// A receiver answering 429 + Retry-After is left alone that long (the attempt does not count
// against the job), while another receiver keeps getting its events at once.
func TestWebhook429RetryAfter(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, WebhookURL: hooks.URL + "/limited/2/1", WebhookSecret: whsec})
	e.putSite(schema.SiteDelivery{SiteID: 2, WebhookURL: hooks.URL + "/ok", WebhookSecret: whsec})
	cfg := e.config()
	cfg.MaxAttempts = 2 // two 429s must not use the attempts up
	e.start(cfg)
	limited := job(schema.TargetWebhook, 1, 1, 1, true, "limited")
	other := job(schema.TargetWebhook, 2, 2, 2, true, "other")
	e.publish(limited, other)
	testkit.WaitFor(t, "both delivered", 10*time.Second, func() bool { return len(e.results.final(schema.StatusDelivered)) == 2 })
	var at []time.Time
	var status []int
	var otherAt time.Time
	for _, ev := range rc.Events() {
		switch ev.ID {
		case limited.ID:
			at, status = append(at, ev.At), append(status, ev.Status)
		case other.ID:
			otherAt = ev.At
		}
	}
	if len(status) != 3 || status[0] != 429 || status[1] != 429 || status[2] != 200 {
		t.Fatalf("limited receiver saw %v, want 429, 429, 200", status)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 900*time.Millisecond {
			t.Errorf("attempt %d came %s after a 429 with Retry-After: 1", i+1, gap)
		}
	}
	if otherAt.Sub(at[0]) > 500*time.Millisecond {
		t.Errorf("the other receiver waited %s behind a rate-limited one", otherAt.Sub(at[0]))
	}
	if n := len(e.results.final(schema.StatusDead)); n != 0 {
		t.Errorf("%d dead results", n)
	}
}

// A forum channel's webhook refuses posts without a thread: the worker learns that from the
// first refusal, opens one thread per conversation with its first message, and posts the rest
// of the conversation into it, in order.
func TestDiscordForumThreads(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	d := mock.NewDiscord(mock.DiscordOptions{Limit: 1000, Window: time.Second})
	ds := httptest.NewServer(d)
	defer ds.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", DiscordWebhook: "https://discord.com/api/webhooks/forum1/tok"})
	cfg := e.config()
	cfg.DiscordAPI = ds.URL + "/api"
	e.start(cfg)
	var jobs []schema.Job
	for k := range 4 {
		for _, conv := range []int64{7, 8} {
			jobs = append(jobs, job(schema.TargetDiscord, 1, conv, conv*100+int64(k), k == 0, marker(conv, k)))
		}
	}
	e.publish(jobs...)
	testkit.WaitFor(t, "discord forum results", 15*time.Second, func() bool {
		return len(e.results.final(schema.StatusDelivered)) == len(jobs)
	})
	threadOf := map[int64]string{}
	seqs := map[int64][]int{}
	for _, p := range d.Posts() {
		m := markerRE.FindStringSubmatch(p.Content)
		if m == nil || p.Thread == "" {
			t.Fatalf("post outside a thread or without a marker: %+v", p)
		}
		conv, _ := strconv.ParseInt(m[1], 10, 64)
		k := int(m[2][0] - '0')
		if k == 0 && p.Created == "" || k > 0 && p.Created != "" {
			t.Errorf("conversation %d message %d: thread_name %q (only the first message opens the thread)", conv, k, p.Created)
		}
		if th, ok := threadOf[conv]; ok && th != p.Thread {
			t.Errorf("conversation %d posted into threads %s and %s", conv, th, p.Thread)
		}
		threadOf[conv] = p.Thread
		seqs[conv] = append(seqs[conv], k)
	}
	if threadOf[7] == threadOf[8] || len(threadOf) != 2 {
		t.Fatalf("threads per conversation: %v", threadOf)
	}
	for conv, seq := range seqs {
		checkOrder(t, conv, seq, 4)
	}
	for _, r := range e.results.snapshot() {
		if r.Status == schema.StatusDelivered && r.ThreadID != threadOf[r.ConversationID] {
			t.Errorf("result %s has thread %q, want %q", r.JobID, r.ThreadID, threadOf[r.ConversationID])
		}
	}
}

// An erasure's webhook: a signed person.erased event with the ids to erase, and a result that
// names the erasure, not a message.
func TestWebhookPersonErased(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, WebhookURL: hooks.URL + "/ok", WebhookSecret: whsec})
	e.start(e.config())
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	j := schema.Job{ID: schema.ErasureJobID("ab12"), Lane: schema.LaneWebhook, Target: schema.TargetWebhook, SiteID: 1, Author: schema.AuthorSystem, CreatedAt: at,
		Erasure: &schema.Erasure{Ref: "ab12", Email: "zoe@example.com", VisitorIDs: []int64{12}, ConversationIDs: []int64{99, 100}, At: at}}
	e.publish(j)
	testkit.WaitFor(t, "the event and its result", 10*time.Second, func() bool {
		return len(rc.Events()) == 1 && len(e.results.of(j.ID)) == 1
	})
	ev := rc.Events()[0]
	var body struct {
		Type string         `json:"type"`
		Data schema.Erasure `json:"data"`
	}
	if err := json.Unmarshal(ev.Body, &body); err != nil || !ev.Valid || ev.ID != j.ID || body.Type != "person.erased" ||
		body.Data.Email != "zoe@example.com" || len(body.Data.ConversationIDs) != 2 || body.Data.VisitorIDs[0] != 12 {
		t.Fatalf("event %s (valid %v, id %s): %v", ev.Body, ev.Valid, ev.ID, err)
	}
	if r := e.results.of(j.ID)[0]; r.Erasure != "ab12" || r.MessageID != 0 || r.Status != schema.StatusDelivered {
		t.Fatalf("result %+v", r)
	}
}

// A job of a conversation the edge says was erased (schema.KeyErased, signed) is dropped:
// acknowledged (gone from JOBS), never sent, no result, no copy in DEAD; another
// conversation's job goes as usual.
func TestErasedConversationsJobsDropped(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	rc := mock.NewReceiver(mock.ReceiverOptions{Secret: whsec})
	hooks := httptest.NewServer(rc)
	defer hooks.Close()
	e.putSite(schema.SiteDelivery{SiteID: 1, WebhookURL: hooks.URL + "/ok", WebhookSecret: whsec})
	kv, err := e.js.KeyValue(context.Background(), schema.BucketSites)
	testkit.NoErr(t, err)
	body, _ := json.Marshal(schema.Erased{Conversations: map[int64]int64{9: time.Now().UnixMilli()}})
	_, err = kv.Put(context.Background(), schema.KeyErased, e.auth.SignSite(schema.KeyErased, body))
	testkit.NoErr(t, err)
	e.start(e.config())
	gone, kept := job(schema.TargetWebhook, 1, 9, 1, true, "an erased person's words"), job(schema.TargetWebhook, 1, 10, 2, true, "another's")
	e.publish(gone, kept)
	testkit.WaitFor(t, "the other conversation's job delivered, JOBS empty", 10*time.Second, func() bool {
		s, err := e.js.Stream(context.Background(), schema.StreamJobs)
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0 && len(e.results.final(schema.StatusDelivered)) == 1
	})
	for _, ev := range rc.Events() {
		if ev.ID == gone.ID {
			t.Fatal("the erased conversation's job was sent")
		}
	}
	if r := e.results.of(gone.ID); len(r) != 0 {
		t.Errorf("results for the dropped job: %+v", r)
	}
	if d := e.deadJobs(); len(d) != 0 {
		t.Errorf("%d jobs in DEAD", len(d))
	}
}
