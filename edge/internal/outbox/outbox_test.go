package outbox_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
	"spookat/edge/internal/outbox"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
)

func TestJobsPerMessageAndWatermark(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	br, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	slackSite := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1", NotifyEmail: "team@site.test"}
	p, err := outbox.New(br.NC, outbox.Config{
		Targets: func(id int64) *schema.SiteDelivery {
			if id == 1 {
				return slackSite
			}
			return &schema.SiteDelivery{SiteID: id} // no targets
		},
		InboxURL: func(conv int64) string { return "http://edge.test/app" },
		ReplyEmail: func(conv int64) string {
			if conv == 10 {
				return "visitor@home.test" // gone, left an address
			}
			return ""
		},
		PublishedThrough: 0,
		Log:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Enqueue([]store.Committed{
		{MessageID: 1, ConversationID: 10, SiteID: 1, Author: "visitor", Text: "hello", First: true},
		{MessageID: 2, ConversationID: 10, SiteID: 1, Author: "operator", Name: "Olivia", Text: "hi!"},
		{MessageID: 3, ConversationID: 10, SiteID: 1, Author: "operator", Text: "note", Internal: true},
		{MessageID: 4, ConversationID: 11, SiteID: 1, Author: "operator", Text: "from slack", Source: schema.SourceSlack, ClientID: "slack:C1:1.2"},
		{MessageID: 5, ConversationID: 12, SiteID: 2, Author: "visitor", Text: "no targets", First: true},
		// A visitor's client id that looks like Slack's changes nothing: the source decides.
		{MessageID: 6, ConversationID: 13, SiteID: 1, Author: "visitor", Text: "hi", Source: schema.SourceWidget, ClientID: "slack:C1:9.9"},
	})
	if !p.Drain(10 * time.Second) {
		t.Fatalf("backlog %d not drained", p.Backlog())
	}
	if wm := p.Watermark(); wm != 6 {
		t.Fatalf("watermark %d after every job was stored, want 6", wm)
	}

	js, _ := jetstream.New(br.NC)
	s, err := js.Stream(ctx, schema.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	var ids []string
	jobs := map[string]schema.Job{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var j schema.Job
		if err := json.Unmarshal(m.Data, &j); err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(jetstream.MsgIDHeader) != j.ID {
			t.Fatalf("Nats-Msg-Id %q for job %q", m.Header.Get(jetstream.MsgIDHeader), j.ID)
		}
		ids = append(ids, j.ID)
		jobs[j.ID] = j
	}
	sort.Strings(ids)
	want := []string{"m1.email", "m1.slack", "m2.email", "m2.slack", "m6.slack"}
	if len(ids) != len(want) {
		t.Fatalf("jobs %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("jobs %v, want %v", ids, want)
		}
	}
	if j := jobs["m2.email"]; j.To != "visitor@home.test" || j.Name != "Olivia" || j.Lane != schema.LaneEmail {
		t.Fatalf("reply email job = %+v", j)
	}
	if j := jobs["m1.email"]; j.To != "" || !j.First {
		t.Fatalf("new-conversation email job = %+v (no recipient: it goes to the site's address)", j)
	}
	if j := jobs["m1.slack"]; j.Text != "hello" || j.InboxURL == "" || j.SiteID != 1 || j.ConversationID != 10 {
		t.Fatalf("slack job = %+v", j)
	}
}
