package jobs

import (
	"fmt"
	"testing"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// BenchmarkAdd is the publisher's share of a message with Slack (its job built, encoded and
// put in its partition's batch), windows sealed every 200 messages (10,000 a second in 20 ms
// windows); the bytes a message allocates are most of what it costs the collector.
func BenchmarkAdd(b *testing.B) {
	site := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1"}
	p := New(Config{Targets: func(int64) *schema.SiteDelivery { return site }})
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
