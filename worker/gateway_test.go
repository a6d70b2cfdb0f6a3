package worker_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
	"spookat/worker"
)

// Issue 37: two worker processes, one site with a Discord bot. The one that owns the site
// holds its gateway; SIGKILLed, the other takes the site over when the first one's WORKERS key
// expires and resumes the session the first shared in THREADS, so replies written in the
// thread while no worker held it arrive too: every reply reaches INBOUND, on the subject of
// the worker that heard it, none twice.
func TestDiscordGatewayTakeover(t *testing.T) {
	bin := os.Getenv("SPOOKAT_BIN")
	if bin == "" {
		t.Skip("SKIPPED: SPOOKAT_BIN is not set; run `make test`, which builds bin/worker first")
	}
	bin = filepath.Join(bin, "worker")
	const bot = "bot-token-of-site-1-0123456789abcdef"
	e := newEnv(t, mock.SlackOptions{})
	gw := mock.NewDiscordGateway(bot, 300*time.Millisecond)
	gs := httptest.NewServer(gw)
	t.Cleanup(gs.Close)
	gw.URL = "ws" + strings.TrimPrefix(gs.URL, "http")
	ctx := context.Background()
	threadsKV, err := e.js.KeyValue(ctx, schema.BucketThreads)
	testkit.NoErr(t, err)
	_, err = threadsKV.Put(ctx, schema.DiscordThreadSiteKey("7001"), []byte("1")) // as the worker that opened it writes
	testkit.NoErr(t, err)

	cfg := e.config()
	cfg.MemberTTL, cfg.PinnedTTL, cfg.AckWait = time.Second, 1500*time.Millisecond, 3*time.Second
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	testkit.NoErr(t, worker.Provision(pctx, e.js, 1, cfg))
	cancel()
	procs := map[string]*workerProc{}
	for _, id := range []string{"g1", "g2"} {
		procs[id] = e.startWorkerProc(t, bin, id, cfg, "-discord-gateway", gw.URL+"/?v=10&encoding=json")
	}
	// The site's bot token only once each worker knows of the other: a worker that started
	// alone would own the site first, identify, and hand it over as the second one arrives (a
	// second identify, no session to resume yet) — a start, not the takeover this test is of.
	testkit.WaitFor(t, "each worker sees the other", 15*time.Second, func() bool {
		return procs["g1"].logged("live=2") && procs["g2"].logged("live=2")
	})
	e.putSite(schema.SiteDelivery{SiteID: 1, Name: "Acme", DiscordWebhook: "https://discord.com/api/webhooks/forum1/tok", DiscordBotToken: bot})

	// What the edge would record: every reply on INBOUND, with the subject it came on.
	heard := make(chan jetstream.Msg, 100)
	cons, err := e.js.OrderedConsumer(ctx, schema.StreamInbound, jetstream.OrderedConsumerConfig{})
	testkit.NoErr(t, err)
	cc, err := cons.Consume(func(m jetstream.Msg) { heard <- m })
	testkit.NoErr(t, err)
	t.Cleanup(cc.Stop)
	next := func() (schema.Inbound, string) {
		t.Helper()
		select {
		case m := <-heard:
			var in schema.Inbound
			testkit.NoErr(t, json.Unmarshal(m.Data(), &in))
			return in, m.Subject()
		case <-time.After(20 * time.Second):
			t.Fatal("no reply on INBOUND within 20 s")
		}
		return schema.Inbound{}, ""
	}
	say := func(id, text string) {
		gw.Say(mock.DiscordMessage{ID: id, ChannelID: "7001", Content: text, Author: mock.DiscordUser{ID: "4001", Username: "dana"}})
	}

	testkit.WaitFor(t, "one worker holds the gateway", 15*time.Second, func() bool { return gw.Connected() == 1 && gw.Identifies() == 1 })
	say("1001", "before the kill")
	in, subject := next()
	owner := strings.TrimPrefix(subject, "inbound.")
	if in.ID != "discord:7001:1001" || procs[owner] == nil {
		t.Fatalf("first reply %+v on %s", in, subject)
	}
	procs[owner].kill()
	say("1002", "while no worker holds it")
	say("1003", "still nobody")
	got := map[string]string{}
	for range 2 {
		in, subject := next()
		got[in.ID] = subject
	}
	other := map[string]string{"g1": "g2", "g2": "g1"}[owner]
	for _, id := range []string{"discord:7001:1002", "discord:7001:1003"} {
		if got[id] != schema.InboundSubject(other) {
			t.Errorf("%s on %q, want %s (the worker that took over)", id, got[id], schema.InboundSubject(other))
		}
	}
	if gw.Identifies() != 1 || gw.Resumes() < 1 {
		t.Errorf("identifies %d, resumes %d: the session was not taken over", gw.Identifies(), gw.Resumes())
	}
	// Two more, in order: a repeat of an earlier reply (a replay from too far back) would come
	// before them, since the one holder hands replies over in order.
	say("1004", "after the takeover")
	say("1005", "and the last")
	for _, want := range []string{"discord:7001:1004", "discord:7001:1005"} {
		if in, _ := next(); in.ID != want {
			t.Fatalf("after the takeover: %+v, want %s", in, want)
		}
	}
}
