package jobs

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// BenchmarkAdd is the publisher's share of a message with Slack (its job built, encoded and
// put in its partition's batch), windows sealed every 200 messages (10,000 a second in 20 ms
// windows); the bytes a message allocates are most of what it costs the collector.
// "none" is a site without targets (loadgen's, and most sites' messages): no job, no link.
func BenchmarkAdd(b *testing.B) {
	inbox := func(conv int64) string {
		return "https://chat.example.com/app/#/conversations/" + strconv.FormatInt(conv, 10)
	}
	for _, tc := range []struct {
		name string
		site *schema.SiteDelivery
	}{
		{"slack", &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1"}},
		{"none", &schema.SiteDelivery{SiteID: 1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			benchAdd(b, New(Config{Targets: func(int64) *schema.SiteDelivery { return tc.site }, InboxURL: inbox}))
		})
	}
}

func benchAdd(b *testing.B, p *Publisher) {
	p.replayEnd = true
	msgs := make([]store.Committed, 1000)
	for i := range msgs {
		msgs[i] = store.Committed{ConversationID: int64(i + 1), SiteID: 1, Author: schema.AuthorVisitor,
			Text: fmt.Sprintf("message %d: where can I find the invoice for last month?", i), CreatedAt: time.Now().UnixMilli()}
	}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := msgs[i%len(msgs)]
		c.MessageID = int64(i + 1)
		p.add(&c, now)
		if p.open.jobs == 200 {
			p.seal(c.MessageID, true)
			p.sealed = p.sealed[:0]
		}
	}
}

// A message without jobs (its site has no targets: most of them) builds no links; one with a
// job gets its conversation's inbox link.
func TestLinksOnlyForJobs(t *testing.T) {
	slack := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1"}
	none := &schema.SiteDelivery{SiteID: 2}
	links := 0
	p := New(Config{
		Targets: func(site int64) *schema.SiteDelivery {
			if site == 1 {
				return slack
			}
			return none
		},
		InboxURL: func(conv int64) string { links++; return fmt.Sprintf("https://x/app/#/conversations/%d", conv) },
	})
	for _, tc := range []struct {
		site  int64
		jobs  int
		links int
	}{{site: 2, jobs: 0, links: 0}, {site: 1, jobs: 1, links: 1}} {
		links = 0
		c := store.Committed{MessageID: 7, ConversationID: 3, SiteID: tc.site, Author: schema.AuthorVisitor, Text: "hi"}
		got := p.jobs(&c)
		if len(got) != tc.jobs || links != tc.links {
			t.Fatalf("site %d: %d jobs, %d links built; want %d and %d", tc.site, len(got), links, tc.jobs, tc.links)
		}
		if tc.jobs > 0 && got[0].InboxURL != "https://x/app/#/conversations/3" {
			t.Fatalf("site %d: inbox link %q", tc.site, got[0].InboxURL)
		}
	}
	c := &store.Committed{MessageID: 8, ConversationID: 4, SiteID: 2, Author: schema.AuthorVisitor, Text: "hi"}
	if n := testing.AllocsPerRun(100, func() { p.jobs(c) }); n != 0 {
		t.Fatalf("a message without jobs allocated %.0f times", n)
	}
}
