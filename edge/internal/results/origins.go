package results

import (
	"math"
	"slices"
	"sync"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// originSlots is how many recent messages Origins remembers: results mostly come back within a
// second of the commit, but behind a backlog (Slack slower than the visitors, a target back
// after an outage) seconds later; older ones are looked up in SQLite. A slot is 24 bytes.
const originSlots = 1 << 16

// Origins remembers where recently committed messages belong, so that checking a result
// (checkOrigin) usually costs no query in the writer's transaction. It is fed with every
// commit (Committed) and answers only for the exact message id it holds; anything else is a miss.
type Origins struct {
	mu   sync.Mutex
	ring [originSlots]origin
}

// origin is a slot: no pointers, so the ring costs the collector nothing to scan.
type origin struct {
	messageID      int64
	conversationID int64
	siteID         uint32
	author, kind   uint8 // indexes in originAuthors, originKinds
}

// The authors and kinds a slot can name; a message of any other is not remembered.
var (
	originAuthors = []schema.Author{schema.AuthorVisitor, schema.AuthorOperator, schema.AuthorSystem}
	originKinds   = []schema.MessageKind{"", schema.KindRating, schema.KindTranscript, schema.KindClosed,
		schema.KindReopened, schema.KindSnoozed, schema.KindAssigned}
)

// Committed (a store.CommitListener) remembers the messages of a commit.
func (c *Origins) Committed(msgs []store.Committed) {
	c.mu.Lock()
	for i := range msgs {
		m := &msgs[i]
		slot := &c.ring[m.MessageID%originSlots]
		a, k := slices.Index(originAuthors, m.Author), slices.Index(originKinds, m.Kind)
		if a < 0 || k < 0 || m.SiteID < 0 || m.SiteID > math.MaxUint32 {
			*slot = origin{} // a miss: the query answers
			continue
		}
		*slot = origin{m.MessageID, m.ConversationID, uint32(m.SiteID), uint8(a), uint8(k)}
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
	return store.MessageOrigin{ConversationID: o.conversationID, SiteID: int64(o.siteID),
		Author: originAuthors[o.author], Kind: originKinds[o.kind]}, true
}
