package widget

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"

	"spookat/edge/internal/frames"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// UserHash is what a site's server computes for identify: hex HMAC-SHA256(secret, userID).
func UserHash(secret, userID string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(userID))
	return hex.EncodeToString(m.Sum(nil))
}

// VerifyUserHash reports whether hash is UserHash(secret, userID), in constant time.
func VerifyUserHash(secret, userID, hash string) bool {
	got, err := hex.DecodeString(strings.ToLower(hash))
	if err != nil || secret == "" || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(userID))
	return hmac.Equal(m.Sum(nil), got)
}

// identify binds the socket to the host page's user. Verified (user_hash matches the site's
// identity secret), the socket speaks for that user's one visitor and conversation, whatever
// device it is on; not verified (no user_hash), the claims are kept on this visitor, shown
// to operators as unverified. A user_hash that does not match is refused and changes nothing.
func (s *session) identify(f *schema.ClientFrame) {
	id := store.Identity{UserID: strings.TrimSpace(f.UserID), Email: strings.TrimSpace(f.Email), Name: strings.TrimSpace(schema.CleanText(f.Name))}
	switch {
	case id.UserID == "" || utf8.RuneCountInString(id.UserID) > schema.MaxUserIDLen || schema.HasControl(id.UserID):
		s.fail("", schema.CodeInvalid, "user_id must be 1 to "+strconv.Itoa(schema.MaxUserIDLen)+" characters, without control characters.", 0)
		return
	case utf8.RuneCountInString(id.Name) > schema.MaxNameLen:
		s.fail("", schema.CodeInvalid, "name must be at most "+strconv.Itoa(schema.MaxNameLen)+" characters.", 0)
		return
	case id.Email != "" && !validEmail(id.Email):
		s.fail("", schema.CodeInvalid, "email does not look like an email address.", 0)
		return
	}
	if f.UserHash != "" {
		if s.site.IdentitySecret == "" {
			s.fail("", schema.CodeUnverified, "This site has no identity secret, so user_hash cannot be checked: set one in the site's settings.", 0)
			return
		}
		if !VerifyUserHash(s.site.IdentitySecret, id.UserID, f.UserHash) {
			s.fail("", schema.CodeUnverified, "user_hash does not match user_id: compute it on your server as the hex HMAC-SHA256 of user_id with the site's identity secret.", 0)
			return
		}
		id.Verified = true
	}
	var st store.VisitorState
	var found bool
	err := s.write(func(tx *store.Tx) error {
		var err error
		st, found, err = tx.IdentifyVisitor(s.site.ID, s.visitorID.Load(), s.tokenHash, id)
		return err
	})
	if err != nil {
		s.h.Log.Error("store identify", "site", s.site.ID, "err", err)
		s.fail("", schema.CodeUnavailable, "Who you are could not be saved; send identify again.", 1000)
		return
	}
	if !found { // an unverified claim before the first message: kept for the operators later
		s.claim = &id
		s.c.send(frames.Identified(nil, false, frames.ConversationState{}))
		return
	}
	if old := s.convID.Load(); old != st.ConversationID {
		if old != 0 {
			s.h.Hub.Unsubscribe(old, s.c)
		}
		if st.ConversationID != 0 {
			s.h.Hub.Subscribe(st.ConversationID, s.c)
		}
		s.c.mu.Lock()
		s.c.lastSent = 0 // another conversation: its ids start over for this socket
		s.c.mu.Unlock()
	}
	s.visitorID.Store(st.VisitorID)
	s.convID.Store(st.ConversationID)
	s.convStarting.Store(false)
	s.readID = st.ReadMessageID
	s.c.send(frames.Identified(nil, id.Verified, conversationOf(st)))
}

func validEmail(addr string) bool { return store.CheckEmail(addr) == nil }
