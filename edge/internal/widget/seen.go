package widget

import (
	"spookat/edge/internal/store"
	"spookat/schema"
)

// typing passes the visitor's typing on to the site's operators, at most once per half
// TypingEvery: a window that repeats it more often adds nothing a reader would see. Before the
// first message there is no conversation an operator could watch, so nothing is passed on.
func (s *session) typing() {
	convID := s.convID.Load()
	if convID == 0 || s.h.Operators == nil {
		return
	}
	now := s.h.Brakes.Now() // ns
	if s.typedAt != 0 && now-s.typedAt < int64(schema.TypingEvery/2) {
		return
	}
	s.typedAt = now
	s.h.Operators.VisitorTyping(s.site.ID, convID)
}

// seen stores the visitor's read marker when it moves forward and tells the operators. A
// marker at or below the stored one changes nothing and costs no write.
func (s *session) seen(messageID int64) {
	if messageID <= 0 {
		s.fail("", schema.CodeInvalid, "message_id must be the id of a message the visitor has seen (1 or more).", 0)
		return
	}
	convID := s.convID.Load()
	if convID == 0 || messageID <= s.readID {
		return
	}
	var marker int64
	var moved bool
	err := s.write(func(tx *store.Tx) error {
		var err error
		marker, moved, err = tx.MarkVisitorRead(convID, messageID)
		return err
	})
	if err != nil {
		s.h.Log.Error("store visitor read marker", "site", s.site.ID, "err", err)
		s.fail("", schema.CodeUnavailable, "The read marker could not be saved; send seen again.", 1000)
		return
	}
	if !moved {
		return
	}
	s.readID = marker
	if s.h.Operators != nil {
		s.h.Operators.VisitorSeen(s.site.ID, convID, marker)
	}
}
