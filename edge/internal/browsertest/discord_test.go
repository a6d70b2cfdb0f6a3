package browsertest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
	"spookat/worker"
)

// Issue 37, point 2, end to end: the visitor writes; the in-process worker opens the
// conversation's thread in a forum channel (the Discord webhook mock) and holds the site's
// gateway (the gateway mock); an operator answers in that thread, and the visitor's window
// shows it, named after them. The gateway drops and resumes mid-conversation: what was said
// meanwhile arrives once. "/close" in the thread closes the conversation (the window asks
// for a rating); the bot's own posts and other bots' are never shown.
func TestDiscordReplyReachesVisitor(t *testing.T) {
	const bot = "bot-token-of-the-discord-site-0123456789"
	rest := mock.NewDiscord(mock.DiscordOptions{Limit: 1000, Window: time.Second})
	rs := httptest.NewServer(rest)
	t.Cleanup(rs.Close)
	gw := mock.NewDiscordGateway(bot, 200*time.Millisecond)
	gs := httptest.NewServer(gw)
	t.Cleanup(gs.Close)
	gw.URL = "ws" + strings.TrimPrefix(gs.URL, "http")
	// Discord's CDN: a 40×30 PNG an operator posts in the thread.
	pic := greenPNG(t)
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/attachments/7/receipt.png" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(pic)
	}))
	t.Cleanup(cdn.Close)
	wcfg := worker.DefaultConfig()
	wcfg.DiscordAPI, wcfg.DiscordGateway = rs.URL+"/api", gw.URL+"/?v=10&encoding=json"
	wcfg.AllowPrivateTargets = true // the mocks listen on 127.0.0.1
	wcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e := startEdge(t, server.Config{Worker: &wcfg, InprocWorker: true})
	site := e.site(&store.Site{Name: "Disco", DiscordWebhook: "https://discord.com/api/webhooks/forum77/tok", DiscordBotToken: bot})
	testkit.WaitFor(t, "the worker holds the site's gateway", 15*time.Second, func() bool { return gw.Identifies() == 1 && gw.Connected() == 1 })

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.typeAndSend("Anyone on Discord?")
	v.waitSent("Anyone on Discord?")
	var thread string
	testkit.WaitFor(t, "the conversation's thread in the forum", 15*time.Second, func() bool {
		for _, p := range rest.Posts() {
			if p.Created != "" {
				thread = p.Thread
			}
		}
		return thread != ""
	})
	db := edgetest.OpenDB(t, e.edge.DataDir)
	testkit.WaitFor(t, "the edge to record the thread", 15*time.Second, func() bool {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE discord_thread = ?`, thread) == 1
	})

	n := 0
	say := func(text string, mutate ...func(*mock.DiscordMessage)) {
		n++
		m := mock.DiscordMessage{ID: "88000000000000" + string(rune('0'+n/10)) + string(rune('0'+n%10)), ChannelID: thread, Content: text,
			Author: mock.DiscordUser{ID: "4001", Username: "dana", GlobalName: "Dana"}}
		for _, f := range mutate {
			f(&m)
		}
		gw.Say(m)
	}
	say("an echo of the webhook's post", func(m *mock.DiscordMessage) { m.WebhookID = "forum77" })
	say("another bot", func(m *mock.DiscordMessage) { m.Author.Bot = true })
	say("Dana here, on Discord: how can I help?")
	v.waitBubble("Dana here, on Discord: how can I help?")
	if who := eval[string](v, W+`.querySelector('li.them .who').textContent`); who != "Dana" {
		t.Fatalf("name %q, want Dana", who)
	}

	// A picture posted in the thread (with a line), and a file that is gone from the CDN: the
	// picture shows in the window, inline; the gone one is skipped, the line still comes.
	say("Here is the receipt:", func(m *mock.DiscordMessage) {
		m.Attachments = []mock.DiscordAttachment{{ID: "61", Filename: "receipt.png", Size: int64(len(pic)), URL: cdn.URL + "/attachments/7/receipt.png", ContentType: "image/png"},
			{ID: "62", Filename: "gone.pdf", Size: 1000, URL: cdn.URL + "/attachments/7/gone.pdf", ContentType: "application/pdf"}}
	})
	v.waitBubble("Here is the receipt:")
	v.waitJS("the picture from Discord, inline", `(() => { const i = `+W+`.querySelector('li:not(.me) .bubble img'); return i && i.complete && i.naturalWidth === 40 && i.naturalHeight === 30; })()`)

	// The connection drops; two replies are written before the worker is back: both arrive,
	// once each, in order, after the session resumes.
	gw.Drop()
	say("First, while the line was down.")
	say("Second, while the line was down.")
	testkit.WaitFor(t, "the session resumed", 15*time.Second, func() bool { return gw.Resumes() >= 1 })
	v.waitBubble("Second, while the line was down.")
	if got := eval[string](v, `[...`+W+`.querySelectorAll('li.them')].map(li => li.textContent).join('|')`); strings.Count(got, "while the line was down") != 2 ||
		strings.Index(got, "First") > strings.Index(got, "Second") {
		t.Fatalf("the visitor's replies: %s", got)
	}
	v.shot("discord-replies")
	for _, absent := range []string{"an echo of the webhook's post", "another bot"} {
		if c := eval[int](v, bubbleCount(absent)); c != 0 {
			t.Fatalf("the visitor sees %q", absent)
		}
	}
	// Nothing the operator wrote in Discord went back to Discord.
	for _, p := range rest.Posts() {
		if strings.Contains(p.Content, "while the line was down") || strings.Contains(p.Content, "how can I help") {
			t.Fatalf("a Discord reply was posted back to Discord: %+v", p)
		}
	}

	say("/close")
	v.waitJS("the window asks for a rating", W+`.querySelector('li.rate')`)
	v.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	v.shot("discord-closed")
}
