package widget

import (
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// page records which page the visitor is on (a page frame). Before the first message it is
// only kept: the first message stores it on the visitor and the conversation it creates.
// After, a page that changed is stored on the visitor and shown live to the site's
// operators. When the site's write cap is spent the page waits in memory for the visitor's
// next message, which stores it: the visitor is not told, they did nothing wrong.
func (s *session) page(f *schema.ClientFrame) {
	c, err := schema.CheckPage(s.origin, f.URL, f.Title, f.Referrer, f.Language, f.TimeZone)
	if err != nil {
		s.fail("", schema.CodeInvalid, err.Error(), 0)
		return
	}
	c.UserAgent, c.Browser = s.ua, schema.Browser(s.ua)
	if s.ctx != nil && s.ctx.Same(&c) {
		return
	}
	c.At = time.Now().UnixMilli()
	s.ctx = &c
	visitorID := s.visitorID.Load()
	if visitorID == 0 {
		return
	}
	if ok, _ := s.site.Brake.AdmitMessage(); !ok {
		s.ctxUnsaved = true
		s.h.Metrics.FrameErrors.WithLabelValues("page_deferred").Inc()
		return
	}
	if err := s.write(func(tx *store.Tx) error { return tx.SetVisitorContext(visitorID, &c) }); err != nil {
		s.h.Log.Error("store visitor page", "site", s.site.ID, "err", err)
		s.ctxUnsaved = true
		return
	}
	s.ctxUnsaved = false
	if convID := s.convID.Load(); convID != 0 && s.h.Operators != nil {
		s.h.Operators.VisitorPage(s.site.ID, convID, &c)
	}
}

// pageFor is the context a message carries to the writer: the page on a first message, and
// on a later one a page that could not be stored when it was reported.
func (s *session) pageFor(first bool) *schema.VisitorContext {
	if first || s.ctxUnsaved {
		s.ctxUnsaved = false
		return s.ctx
	}
	return nil
}
