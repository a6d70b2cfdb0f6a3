package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
	"spookat/worker/internal/deliver"
)

const token = "bot-token-of-site-7-0123456789abcdef"

// threadsOf is the THREADS bucket's thread → site keys, in memory.
type threadsOf map[string]string

func (t threadsOf) SiteOfThread(_ context.Context, thread string) (string, error) {
	return t[thread], nil
}

// published collects what the gateway hands to INBOUND; failing makes the next few fail.
type published struct {
	mu      sync.Mutex
	list    []*schema.Inbound
	failing int
}

func (p *published) publish(_ context.Context, in *schema.Inbound) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing > 0 {
		p.failing--
		return errors.New("nats: no responders")
	}
	p.list = append(p.list, in)
	return nil
}

func (p *published) all() []*schema.Inbound {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*schema.Inbound(nil), p.list...)
}

func start(t *testing.T, tok string, cfg Config) (*mock.DiscordGateway, *Manager) {
	t.Helper()
	gw := mock.NewDiscordGateway(token, 100*time.Millisecond)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	gw.URL = "ws" + strings.TrimPrefix(srv.URL, "http")
	cfg.URL = gw.URL + "/?v=10&encoding=json"
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	m := New(cfg)
	t.Cleanup(m.Close)
	m.Set(context.Background(), []*schema.SiteDelivery{{SiteID: 7, DiscordBotToken: tok, DiscordWebhook: "https://discord.com/api/webhooks/4242/secret"}})
	return gw, m
}

func person(id, channel, text string) mock.DiscordMessage {
	return mock.DiscordMessage{ID: id, ChannelID: channel, Content: text, Author: mock.DiscordUser{ID: "300", Username: "dana", GlobalName: "Dana"}}
}

// waitFor waits until n events are published and returns them.
func waitFor(t *testing.T, p *published, n int) []*schema.Inbound {
	t.Helper()
	testkit.WaitFor(t, "events handed to INBOUND", 10*time.Second, func() bool { return len(p.all()) >= n })
	return p.all()
}

// What a site's gateway forwards: a person's message in one of its conversations' threads, a
// Discord reply to one of its webhook's posts, /close, notes. Not the bots', not webhooks',
// not its own, not other threads': those are said first, and the first thing forwarded is the
// message after them.
func TestForwardsRepliesOnly(t *testing.T) {
	p := &published{}
	gw, _ := start(t, token, Config{Threads: threadsOf{"7001": "7", "8001": "8"}, Publish: p.publish})
	testkit.WaitFor(t, "identified", 10*time.Second, func() bool { return gw.Identifies() == 1 })

	bot := person("1", "7001", "a bot")
	bot.Author.Bot = true
	hook := person("2", "7001", "our own post")
	hook.WebhookID = "4242"
	self := person("3", "7001", "the bot itself")
	self.Author.ID = gw.BotUserID
	for _, m := range []mock.DiscordMessage{bot, hook, self, person("4", "8001", "another site's thread"),
		person("5", "555", "a channel's chatter"), person("6", "7001", "   ")} {
		gw.Say(m)
	}
	inThread := person("10", "7001", "Hi, Dana here.")
	reply := person("11", "600", "Replying to the post.")
	reply.Reference, reply.Referenced = &mock.DiscordRef{MessageID: "5001"}, &mock.DiscordParent{ID: "5001", WebhookID: "4242"}
	otherHook := person("12", "600", "A reply to someone else's webhook")
	otherHook.Reference, otherHook.Referenced = &mock.DiscordRef{MessageID: "5009"}, &mock.DiscordParent{ID: "5009", WebhookID: "999"}
	for _, m := range []mock.DiscordMessage{inThread, reply, otherHook, person("13", "7001", "/close"), person("14", "7001", "note: call them back")} {
		gw.Say(m)
	}
	got := waitFor(t, p, 4)
	want := []schema.Inbound{
		{ID: "discord:7001:10", Thread: "7001", Text: "Hi, Dana here."},
		{ID: "discord:600:11", ReplyTo: "5001", Text: "Replying to the post."},
		{ID: "discord:7001:13", Thread: "7001", Kind: schema.KindClosed},
		{ID: "discord:7001:14", Thread: "7001", Text: "call them back", Internal: true},
	}
	if len(got) != len(want) {
		t.Fatalf("forwarded %d, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Thread != w.Thread || g.ReplyTo != w.ReplyTo || g.Text != w.Text || g.Kind != w.Kind || g.Internal != w.Internal ||
			g.SiteID != 7 || g.Source != schema.SourceDiscord || g.Author != "Dana" || g.Check() != nil {
			t.Errorf("event %d: %+v, want %+v", i, g, w)
		}
	}
}

// The connection dropped, a zombie connection (heartbeats not acknowledged), a RECONNECT: each
// time the session resumes and what was said meanwhile arrives, once, in order; an
// invalidated session identifies again; INBOUND refusing for a while loses nothing.
func TestResumesWithoutLossOrRepeat(t *testing.T) {
	p := &published{}
	gw, _ := start(t, token, Config{Threads: threadsOf{"7001": "7"}, Publish: p.publish})
	testkit.WaitFor(t, "identified", 10*time.Second, func() bool { return gw.Identifies() == 1 && gw.Connected() == 1 })
	n := 0
	say := func(k int) {
		for range k {
			n++
			gw.Say(person(strings.Repeat("9", 3)+string(rune('0'+n%10))+time.Now().Format("150405.000000"), "7001", "line"))
		}
	}
	say(2)
	waitFor(t, p, 2)

	gw.Drop()
	say(3) // while no connection is up: Discord keeps them for the resume
	testkit.WaitFor(t, "resumed after the drop", 10*time.Second, func() bool { return gw.Resumes() == 1 })
	waitFor(t, p, 5)

	gw.AckHeartbeats(false)
	testkit.WaitFor(t, "a zombie connection dropped and resumed", 10*time.Second, func() bool { return gw.Resumes() == 2 })
	gw.AckHeartbeats(true)
	say(1)
	waitFor(t, p, 6)

	gw.Reconnect()
	testkit.WaitFor(t, "resumed after RECONNECT", 10*time.Second, func() bool { return gw.Resumes() == 3 })
	p.mu.Lock()
	p.failing = 3
	p.mu.Unlock()
	say(2)
	waitFor(t, p, 8)

	gw.Invalidate()
	testkit.WaitFor(t, "identified again", 15*time.Second, func() bool { return gw.Identifies() == 2 && gw.Connected() == 1 })
	say(1)
	got := waitFor(t, p, 9)
	seen := map[string]bool{}
	for _, in := range got {
		if seen[in.ID] {
			t.Errorf("%s handed over twice", in.ID)
		}
		seen[in.ID] = true
	}
	if len(got) != 9 {
		t.Errorf("%d handed over, want 9", len(got))
	}
}

// A refused token is given up at once (Discord's 4004), not retried forever.
func TestRefusedTokenIsGivenUp(t *testing.T) {
	fatal := make(chan int, 1)
	gw, _ := start(t, "not-the-bots-token-0123456789abcdef", Config{Threads: threadsOf{}, Publish: (&published{}).publish,
		OnFatal: func(site int64, code int, why string) { fatal <- code }})
	select {
	case code := <-fatal:
		if code != 4004 || gw.Identifies() != 0 {
			t.Fatalf("gave up with %d after %d identifies", code, gw.Identifies())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still trying a refused token")
	}
}

// memFiles is INBOUND_FILES in memory.
type memFiles struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (f *memFiles) Has(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[name]
	return ok, nil
}

func (f *memFiles) Put(_ context.Context, name string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[name] = data
	return nil
}

// Attachments: each is an event of its own, after the text, its bytes put in INBOUND_FILES
// first; one from a host that is not Discord's CDN, one larger than 25 MiB and one the CDN no
// longer has are skipped (the rest still go); at most four a message.
func TestForwardsAttachments(t *testing.T) {
	p, files := &published{}, &memFiles{m: map[string][]byte{}}
	download := func(_ context.Context, url string, max int64) ([]byte, error) {
		if strings.HasSuffix(url, "/gone.pdf") {
			return nil, deliver.ErrNotFetchable
		}
		return []byte("bytes of " + url[strings.LastIndex(url, "/")+1:]), nil
	}
	gw, _ := start(t, token, Config{Threads: threadsOf{"7001": "7"}, Publish: p.publish, Files: files, Download: download})
	testkit.WaitFor(t, "identified", 10*time.Second, func() bool { return gw.Identifies() == 1 })
	cdn := "https://cdn.discordapp.com/attachments/7001/"
	m := person("20", "7001", "two files")
	m.Attachments = []mock.DiscordAttachment{
		{ID: "1", Filename: "a.png", Size: 10, URL: cdn + "a.png"},
		{ID: "2", Filename: "b.png", Size: 10, URL: "https://evil.example/b.png"},
		{ID: "3", Filename: "huge.zip", Size: schema.MaxInboundFileBytes + 1, URL: cdn + "huge.zip"},
		{ID: "4", Filename: "gone.pdf", Size: 10, URL: cdn + "gone.pdf"},
		{ID: "5", Filename: "e.txt", Size: 10, URL: cdn + "e.txt"}, // the fifth: past four
	}
	gw.Say(m)
	gw.Say(person("21", "7001", "the barrier"))
	got := waitFor(t, p, 3)
	var ids []string
	for _, in := range got {
		ids = append(ids, in.ID)
	}
	if strings.Join(ids, " ") != "discord:7001:20 discord:7001:20:1 discord:7001:21" {
		t.Fatalf("forwarded %v", ids)
	}
	if f := got[1].File; f == nil || f.Object != "discord:7001:20:1" || f.Name != "a.png" || got[1].Text != "" || string(files.m[f.Object]) != "bytes of a.png" {
		t.Fatalf("the file event %+v (%+v), stored %q", got[1], got[1].File, files.m)
	}
}
