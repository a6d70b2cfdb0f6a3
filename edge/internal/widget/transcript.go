package widget

import (
	"context"
	"time"

	"spookat/edge/internal/frames"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/fastjson"
)

// transcriptEvery is how often one socket may ask for the conversation by email.
const transcriptEvery = time.Minute

// transcript emails the closed conversation to the address the visitor left. The request is a
// system message (kind transcript) in the conversation, which operators see; its one job is
// the email, built from the conversation as the visitor saw it when the message committed.
func (s *session) transcript() {
	convID := s.convID.Load()
	if convID == 0 {
		s.fail("", schema.CodeInvalid, "There is no conversation to send yet.", 0)
		return
	}
	now := s.h.Brakes.Now()
	if s.transcriptAt != 0 && time.Duration(now-s.transcriptAt) < transcriptEvery {
		wait := transcriptEvery - time.Duration(now-s.transcriptAt)
		s.fail("", schema.CodeRateLimited, "The conversation was sent a moment ago; ask again in a minute.", max(wait.Milliseconds(), 1))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	email, closed, err := s.h.Store.TranscriptTarget(ctx, convID)
	cancel()
	if err != nil {
		s.h.Log.Error("visitor email lookup", "site", s.site.ID, "err", err)
		s.fail("", schema.CodeUnavailable, "The conversation cannot be sent now; ask again shortly.", 1000)
		return
	}
	if email == "" {
		s.fail("", schema.CodeInvalid, "Leave your email first: the conversation is sent there.", 0)
		return
	}
	if !closed {
		// An operator has read what it holds: nobody mails words of their own choosing to an
		// address of their choosing through the site.
		s.fail("", schema.CodeInvalid, "The conversation can be sent by email once it is closed.", 0)
		return
	}
	if !s.admitSiteWrite("") { // it writes a message
		return
	}
	s.transcriptAt = now
	c := s.c
	err = s.h.Store.SubmitMessage(&store.MessageRequest{SiteID: s.site.ID, VisitorID: s.visitorID.Load(), ConversationID: convID,
		Author: schema.AuthorSystem, Name: "Transcript", Text: "Transcript emailed to " + email, Kind: schema.KindTranscript,
		Source: schema.SourceWidget, Origin: c, Done: func(r store.MessageResult) {
			if r.Err != nil {
				c.trySend(frames.Error(nil, "", schema.CodeUnavailable, "The conversation could not be sent; ask again.", 1000))
				return
			}
			b := append([]byte(`{"type":"transcript_sent","email":`), fastjson.AppendString(nil, email)...)
			c.trySend(append(b, '}'))
		}})
	if err != nil {
		s.transcriptAt = 0
		s.fail("", schema.CodeUnavailable, "The server is too busy to send the conversation now; ask again.", 1000)
	}
}
