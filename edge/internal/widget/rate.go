package widget

import (
	"strings"
	"unicode/utf8"

	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/fastjson"
)

// rate stores the visitor's rating of their closed conversation, once, and writes it into the
// conversation as a system message, which the inbox shows and the site's targets (Slack,
// Discord, webhooks) receive like any other message.
func (s *session) rate(rating, comment string) {
	comment = strings.TrimSpace(schema.CleanText(comment))
	switch {
	case rating != schema.RatingGood && rating != schema.RatingBad:
		s.fail("", schema.CodeInvalid, `rating must be "good" or "bad".`, 0)
		return
	case utf8.RuneCountInString(comment) > schema.MaxRatingComment:
		s.fail("", schema.CodeTooLarge, "The comment is longer than 500 characters.", 0)
		return
	}
	convID := s.convID.Load()
	if convID == 0 {
		s.fail("", schema.CodeInvalid, "There is no conversation to rate yet.", 0)
		return
	}
	if !s.admitSiteWrite("") { // it writes a message
		return
	}
	var rated bool
	err := s.write(func(tx *store.Tx) error {
		var err error
		rated, err = tx.RateConversation(convID, rating, comment)
		return err
	})
	switch {
	case err != nil:
		s.h.Log.Error("store rating", "site", s.site.ID, "err", err)
		s.fail("", schema.CodeUnavailable, "The rating could not be saved; send it again.", 1000)
		return
	case !rated:
		s.fail("", schema.CodeInvalid, "Only a closed conversation can be rated, and only once.", 0)
		return
	}
	text := "Rated the conversation: good 👍"
	if rating == schema.RatingBad {
		text = "Rated the conversation: bad 👎"
	}
	if comment != "" {
		text += "\n“" + comment + "”"
	}
	// The rating is stored (once: no second message can follow); its message is best effort.
	_ = s.h.Store.SubmitMessage(&store.MessageRequest{SiteID: s.site.ID, VisitorID: s.visitorID.Load(), ConversationID: convID,
		Author: schema.AuthorSystem, Name: "Rating", Text: text, Kind: schema.KindRating, Source: schema.SourceWidget, Origin: s.c,
		Done: func(store.MessageResult) {}})
	if s.h.Operators != nil {
		s.h.Operators.Rated(s.site.ID, convID, rating, comment)
	}
	b := append([]byte(`{"type":"rated","rating":`), fastjson.AppendString(nil, rating)...)
	s.c.send(append(b, '}'))
}
