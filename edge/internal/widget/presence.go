package widget

import (
	"context"
	"sync"
	"time"

	"spookat/edge/internal/frames"
	"spookat/edge/internal/sites"
)

// The chat window says whether the site's operators are around: online, or away (with when
// the office hours open again, when they are why). The hello carries it; after that a
// presence frame says it again whenever it changes, to every open window of the site:
// - at once when an inbox opens or the last one closes (the inbox hub's WatchChanged) and
//   when a reply makes the site online (presence.Tracker's Came), both sent on the
//   Handler's PresenceChanges;
// - within PresenceSweep for what time alone changes (a reply growing old, office hours
//   beginning or ending): every site with an open window is looked at again.

// PresenceSweep is how often RunPresence looks at every site with an open window.
const PresenceSweep = 15 * time.Second

type presence struct {
	mu   sync.Mutex
	said map[int64]string // per site, the status (and opens_at) its windows were last told
}

// presenceOf is a site's status as its windows show it now: online while its operators are
// around and its office hours are open, else away, with when the hours open next.
func (h *Handler) presenceOf(site *sites.Site, now time.Time) (status, opensAt string) {
	open := site.Hours.OpenAt(now)
	if open && h.Online != nil && h.Online(site.ID) {
		status = "online"
	} else {
		status = "away"
		if next := site.Hours.NextOpen(now); !open && !next.IsZero() {
			opensAt = next.UTC().Format(time.RFC3339)
		}
	}
	h.presence.mu.Lock()
	if h.presence.said == nil {
		h.presence.said = make(map[int64]string)
	}
	h.presence.said[site.ID] = status + " " + opensAt
	h.presence.mu.Unlock()
	return status, opensAt
}

// PresenceChanged asks, without waiting, for the site's windows to be told its status again
// if it changed: when ch is full (a burst), the site waits for the next sweep. For the
// writer's goroutine and the inbox hub, which must not block.
func PresenceChanged(ch chan<- int64, siteID int64) {
	select {
	case ch <- siteID:
	default:
	}
}

// RunPresence tells open windows of their site's status changes until ctx ends.
func (h *Handler) RunPresence(ctx context.Context, sweep time.Duration) {
	t := time.NewTicker(sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-h.PresenceChanges:
			h.tellPresence(id, time.Now())
		case <-t.C:
			now := time.Now()
			for _, id := range h.sitesWithWindows() {
				h.tellPresence(id, now)
			}
		}
	}
}

// sitesWithWindows lists the sites with an open window, and forgets what was said to the
// others.
func (h *Handler) sitesWithWindows() []int64 {
	h.mu.Lock()
	ids := make([]int64, 0, len(h.bySite))
	for id := range h.bySite {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	open := make(map[int64]bool, len(ids))
	for _, id := range ids {
		open[id] = true
	}
	h.presence.mu.Lock()
	for id := range h.presence.said {
		if !open[id] {
			delete(h.presence.said, id)
		}
	}
	h.presence.mu.Unlock()
	return ids
}

// tellPresence sends the site's windows a presence frame when its status differs from what
// they were last told.
func (h *Handler) tellPresence(siteID int64, now time.Time) {
	site := h.Sites.ByID(siteID)
	if site == nil {
		return
	}
	h.presence.mu.Lock()
	before, known := h.presence.said[siteID]
	h.presence.mu.Unlock()
	status, opensAt := h.presenceOf(site, now)
	if known && before == status+" "+opensAt {
		return
	}
	frame := frames.Presence(nil, status, opensAt)
	h.mu.Lock()
	list := make([]*conn, 0, len(h.bySite[siteID]))
	for c := range h.bySite[siteID] {
		list = append(list, c)
	}
	h.mu.Unlock()
	for _, c := range list {
		c.trySend(frame)
	}
}
