package widget

import (
	"context"
	"net/mail"
	"strings"
	"time"

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
	// A write like a message's: it counts against the site's message cap.
	if ok, wait := s.site.Brake.AdmitMessage(); !ok {
		s.fail("", schema.CodeBraked, "This site is receiving too many messages right now; try again shortly.", max(wait.Milliseconds(), 1))
		return
	}
	visitorID := s.visitorID.Load() // after an identify, the user's visitor: not the token's
	if visitorID == 0 {
		s.fail("", schema.CodeInvalid, "Send a message first, then leave your email.", 0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var found bool
	err := s.h.Store.Write(ctx, func(tx *store.Tx) error {
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
