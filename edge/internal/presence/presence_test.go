package presence

import (
	"testing"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

func TestOnlineWhileWatchedOrAfterAReply(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	watched := map[int64]bool{}
	tr := &Tracker{Watching: func(id int64) bool { return watched[id] }, Now: func() time.Time { return now }}
	if tr.Online(1) {
		t.Fatal("online with nobody around")
	}
	watched[1] = true
	if !tr.Online(1) {
		t.Fatal("an open inbox is online")
	}
	watched[1] = false
	tr.Committed([]store.Committed{{SiteID: 2, Author: schema.AuthorVisitor}, {SiteID: 3, Author: schema.AuthorOperator, Internal: true}})
	if tr.Online(2) || tr.Online(3) {
		t.Fatal("a visitor's message or an internal note made a site online")
	}
	tr.Committed([]store.Committed{{SiteID: 2, Author: schema.AuthorOperator}})
	now = now.Add(Recent - time.Second)
	if !tr.Online(2) {
		t.Fatal("a reply a moment ago is online")
	}
	now = now.Add(2 * time.Second)
	if tr.Online(2) {
		t.Fatal("still online past Recent")
	}
}
