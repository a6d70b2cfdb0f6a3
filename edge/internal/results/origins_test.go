package results

import (
	"testing"
	"unsafe"

	"spookat/edge/internal/store"
	"spookat/schema"
)

func TestOriginsAnswerOnlyForTheMessageTheyHold(t *testing.T) {
	var o Origins
	o.Committed([]store.Committed{
		{MessageID: 7, ConversationID: 70, SiteID: 3, Author: schema.AuthorOperator},
		{MessageID: 8, ConversationID: 80, SiteID: 4, Author: schema.AuthorVisitor, Kind: schema.KindTranscript},
		{MessageID: 10, ConversationID: 100, SiteID: 1 << 40, Author: schema.AuthorVisitor}, // beyond a slot: asked of SQLite
		{MessageID: 11, ConversationID: 110, SiteID: 5, Author: "robot"},                    // an author a slot cannot name
	})
	for _, c := range []struct {
		name  string
		id    int64
		want  store.MessageOrigin
		found bool
	}{
		{"remembered", 7, store.MessageOrigin{ConversationID: 70, SiteID: 3, Author: schema.AuthorOperator}, true},
		{"another remembered", 8, store.MessageOrigin{ConversationID: 80, SiteID: 4, Author: schema.AuthorVisitor, Kind: schema.KindTranscript}, true},
		{"site id too large for a slot", 10, store.MessageOrigin{}, false},
		{"unknown author", 11, store.MessageOrigin{}, false},
		{"never seen", 9, store.MessageOrigin{}, false},
		{"same slot, other id", 7 + originSlots, store.MessageOrigin{}, false},
		{"zero", 0, store.MessageOrigin{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, found := o.Get(c.id)
			if found != c.found || got != c.want {
				t.Errorf("Get(%d) = %+v, %v; want %+v, %v", c.id, got, found, c.want, c.found)
			}
		})
	}
	o.Committed([]store.Committed{{MessageID: 7 + originSlots, ConversationID: 1, SiteID: 1}})
	if _, found := o.Get(7); found {
		t.Error("a message overwritten in its slot still answers")
	}
	if size := unsafe.Sizeof(origin{}); size != 24 {
		t.Errorf("a slot is %d bytes; originSlots' comment says 24", size)
	}
	var none *Origins
	if _, found := none.Get(7); found {
		t.Error("a nil Origins answers")
	}
}
