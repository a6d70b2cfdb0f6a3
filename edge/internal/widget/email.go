package widget

import (
	"net/mail"
	"strings"

	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/fastjson"
)

// email stores the email a visitor leaves ("leave your email"), so an operator can answer
// after the visitor has gone. Rare, so it may allocate and wait for its commit; it runs on the
// socket's reader goroutine, never on the writer's.
func (s *session) email(addr string) {
	addr = strings.TrimSpace(addr)
	if len(addr) > schema.MaxEmailLen {
		s.fail("", schema.CodeInvalid, "The email address is too long.", 0)
		return
	}
	if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr || !strings.Contains(addr, "@") {
		s.fail("", schema.CodeInvalid, "This does not look like an email address.", 0)
		return
	}
	if !s.admitSiteWrite("") { // a write like a message's
		return
	}
	visitorID := s.visitorID.Load() // after an identify, the user's visitor: not the token's
	if visitorID == 0 {
		s.fail("", schema.CodeInvalid, "Send a message first, then leave your email.", 0)
		return
	}
	var found bool
	err := s.write(func(tx *store.Tx) error {
		var err error
		found, err = tx.SetVisitorEmail(s.site.ID, visitorID, addr)
		return err
	})
	switch {
	case err != nil:
		s.h.Log.Error("store visitor email", "site", s.site.ID, "err", err)
		s.fail("", schema.CodeUnavailable, "The email could not be saved; try again.", 1000)
	case !found:
		s.fail("", schema.CodeInvalid, "Send a message first, then leave your email.", 0)
	default:
		b := append([]byte(`{"type":"email_saved","email":`), fastjson.AppendString(nil, addr)...)
		s.c.send(append(b, '}'))
	}
}
