package results

import (
	"sync"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// originSlots is how many recent messages Origins remembers: results mostly come back within a
// second of the commit (a post's latency plus the publish and result windows); older ones are
// looked up in SQLite.
const originSlots = 1 << 15

// Origins remembers where recently committed messages belong, so that checking a result
// (checkOrigin) usually costs no query in the writer's transaction. It is fed with every
// commit (Committed) and answers only for the exact message id it holds; anything else is a miss.
type Origins struct {
	mu   sync.Mutex
	ring [originSlots]origin
}

type origin struct {
	messageID      int64
	conversationID int64
	siteID         int64
	author         schema.Author
	kind           schema.MessageKind
}

// Committed (a store.CommitListener) remembers the messages of a commit.
func (c *Origins) Committed(msgs []store.Committed) {
	c.mu.Lock()
	for i := range msgs {
		m := &msgs[i]
		c.ring[m.MessageID%originSlots] = origin{m.MessageID, m.ConversationID, m.SiteID, m.Author, m.Kind}
	}
	c.mu.Unlock()
}

// Get returns a message's origin if it is still remembered.
func (c *Origins) Get(messageID int64) (store.MessageOrigin, bool) {
	if c == nil || messageID <= 0 {
		return store.MessageOrigin{}, false
	}
	c.mu.Lock()
	o := c.ring[messageID%originSlots]
	c.mu.Unlock()
	if o.messageID != messageID {
		return store.MessageOrigin{}, false
	}
	return store.MessageOrigin{ConversationID: o.conversationID, SiteID: o.siteID, Author: o.author, Kind: o.kind}, true
}
