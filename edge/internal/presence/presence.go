// Package presence says whether a site's operators are around, for the chat window's
// "online" or "away": someone has the site's inbox open, or an operator replied (from the
// inbox, the API or Slack) within Recent. Office hours are the window's own rule on top.
package presence

import (
	"sync"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Recent is how long after an operator's reply a site counts as online.
const Recent = 10 * time.Minute

// Tracker remembers each site's last operator reply; Watching says whether an inbox watches
// a site (the inbox hub's).
type Tracker struct {
	Watching func(siteID int64) bool
	Now      func() time.Time // nil: time.Now
	// Came, if set, hears of each site that a reply made online (it was not before). Called
	// on the writer's goroutine: it must not block.
	Came func(siteID int64)

	mu      sync.Mutex
	replied map[int64]time.Time
}

func (t *Tracker) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Committed is the tracker's store.CommitListener: it notes the operators' replies. On the writer's
// goroutine: a loop over the batch, a lock only for a reply.
func (t *Tracker) Committed(msgs []store.Committed) {
	for i := range msgs {
		if msgs[i].Author != schema.AuthorOperator || msgs[i].Internal {
			continue
		}
		now, site := t.now(), msgs[i].SiteID
		t.mu.Lock()
		if t.replied == nil {
			t.replied = make(map[int64]time.Time)
		}
		at, ok := t.replied[site]
		t.replied[site] = now
		t.mu.Unlock()
		if t.Came != nil && (!ok || now.Sub(at) >= Recent) {
			t.Came(site)
		}
	}
}

// Online reports whether the site's operators are around now.
func (t *Tracker) Online(siteID int64) bool {
	if t.Watching != nil && t.Watching(siteID) {
		return true
	}
	t.mu.Lock()
	at, ok := t.replied[siteID]
	t.mu.Unlock()
	return ok && t.now().Sub(at) < Recent
}
