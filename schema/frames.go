// Package schema is the contract shared by the edge, the worker and loadgen: SQL migrations,
// websocket frames, job and result payloads, stream and subject names. Nothing else defines
// these twice. The frames are documented for users in PROTOCOL.md beside this file.
package schema

import "time"

// Frame types on the widget websocket (JSON text frames, one object per frame).
const (
	FrameHello   = "hello"   // server → client, first frame after upgrade
	FrameMessage = "message" // client → server (send), server → client (history and live)
	FrameAck     = "ack"     // server → client, after the message's transaction has committed
	FrameResume  = "resume"  // client → server: replay messages after an id, then live ones
	FrameError   = "error"   // server → client
	// FrameEmail (client → server) stores the email a visitor leaves so an operator can answer
	// later; FrameEmailSaved (server → client) confirms it.
	FrameEmail      = "email"
	FrameEmailSaved = "email_saved"
	// FrameTyping: client → server, the visitor is writing; server → client, an operator is.
	// Ephemeral: fanned out in memory, never stored; it lasts TypingLasts unless repeated.
	FrameTyping = "typing"
	// FrameSeen: client → server, the visitor has seen the conversation up to message_id
	// (stored, shown to operators); server → client, an operator has read it up to message_id.
	FrameSeen = "seen"
	// FrameIdentify (client → server) says who the host page's logged-in user is;
	// FrameIdentified (server → client) answers with the conversation the socket now speaks for.
	FrameIdentify   = "identify"
	FrameIdentified = "identified"
	// FrameRate (client → server) rates a closed conversation; FrameRated confirms it.
	// FrameConversation (server → client) tells the visitor it was closed or reopened.
	FrameRate         = "rate"
	FrameRated        = "rated"
	FrameConversation = "conversation"
	// FrameTranscript (client → server) asks for the conversation by email, at the address the
	// visitor left; FrameTranscriptSent confirms it is on its way.
	FrameTranscript     = "transcript"
	FrameTranscriptSent = "transcript_sent"
	// FramePage (client → server) says which page the visitor is on (VisitorContext): sent
	// after each hello and when the page changes. No answer unless it is refused.
	FramePage = "page"
)

// MessageKind says what a system message is; "" is a message someone wrote.
type MessageKind string

// Message kinds.
const (
	KindRating     MessageKind = "rating"     // the visitor rated the conversation
	KindTranscript MessageKind = "transcript" // the visitor asked for the conversation by email
	KindClosed     MessageKind = "closed"     // an operator closed the conversation (inbox or Slack)
	KindReopened   MessageKind = "reopened"   // an operator reopened it, or its snooze ended (a visitor's message reopens it too: Job.Reopened)
	KindSnoozed    MessageKind = "snoozed"    // an operator snoozed it until a time: it reopens by itself then
	KindAssigned   MessageKind = "assigned"   // an operator assigned it to a teammate, or to nobody (inbox only)
)

// ConvStatus is a conversation's status, as conversations.status stores it.
type ConvStatus string

// Conversation statuses. Snoozed is open to the visitor.
const (
	ConvOpen    ConvStatus = "open"
	ConvSnoozed ConvStatus = "snoozed"
	ConvClosed  ConvStatus = "closed"
)

// Changes reports a message that records a change of the conversation (status or assignee)
// rather than something said: it is not the conversation's last message.
func (k MessageKind) Changes() bool { return k.Status() != "" || k == KindAssigned }

// VisitorStatus is a conversation's status as its visitor sees it: snoozed is open.
func VisitorStatus(status ConvStatus) ConvStatus {
	if status == ConvSnoozed {
		return ConvOpen
	}
	return status
}

// Status is the conversation status a status message sets ("" for other kinds).
func (k MessageKind) Status() ConvStatus {
	switch k {
	case KindClosed:
		return ConvClosed
	case KindReopened:
		return ConvOpen
	case KindSnoozed:
		return ConvSnoozed
	}
	return ""
}

// Ratings of a conversation.
const (
	RatingGood       = "good"
	RatingBad        = "bad"
	MaxRatingComment = 500
)

// Identity limits.
const (
	MaxUserIDLen   = 128
	MaxNameLen     = 100
	UserHashHexLen = 64 // hex HMAC-SHA256
)

// Typing: a client repeats its typing frame at most every TypingEvery while someone writes;
// a reader shows it for TypingLasts after the last one, or until that person's message comes.
// The edge passes on at most one typing frame per socket (or operator) per TypingEvery/2.
const (
	TypingEvery = 3 * time.Second
	TypingLasts = 6 * time.Second
)

// MaxEmailLen bounds the email of an email frame.
const MaxEmailLen = 254

// Error codes carried by an error frame.
const (
	CodeInvalid     = "invalid"      // malformed frame or field out of range; fix the frame
	CodeTooLarge    = "too_large"    // text longer than MaxTextRunes
	CodeRateLimited = "rate_limited" // this connection or address sends too fast; retry after retry_after_ms
	CodeBraked      = "braked"       // the site is under a flood brake; retry after retry_after_ms
	CodeUnavailable = "unavailable"  // the server cannot take it now (shutting down, overloaded)
	CodeUnverified  = "unverified"   // identify's user_hash does not match; nothing was applied
	CodePlanLimit   = "plan_limit"   // the site's plan takes no new conversation this month (an edge with -plans); not retried
)

// Limits of the widget protocol.
const (
	MaxFrameBytes   = 16 << 10 // a larger frame closes the socket with 1009
	MaxTextRunes    = 4000
	MaxClientIDLen  = 64
	VisitorTokenLen = 32 // characters of base64url: 192 random bits
)

// Author is who wrote a message, as messages.author stores it.
type Author string

// Message authors.
const (
	AuthorVisitor  Author = "visitor"
	AuthorOperator Author = "operator"
	AuthorSystem   Author = "system"
)

// Source is where a message was written: it decides where its jobs go (a reply from Slack is
// never posted back to Slack) and scopes its client id.
type Source string

// Message sources.
const (
	SourceWidget  Source = "widget"  // a visitor's chat window
	SourceInbox   Source = "inbox"   // an operator in the web inbox or the API
	SourceSlack   Source = "slack"   // an operator's reply in a Slack thread
	SourceDiscord Source = "discord" // an operator's reply in a Discord thread (INBOUND)
)

// Outside is the delivery target a source is: a reply from it is never posted back there.
func (s Source) Outside() string {
	switch s {
	case SourceSlack:
		return TargetSlack
	case SourceDiscord:
		return TargetDiscord
	}
	return ""
}

// ClientFrame is any frame a widget sends; Type selects which fields matter.
type ClientFrame struct {
	Type           string `json:"type"`
	ClientID       string `json:"client_id,omitempty"`
	Text           string `json:"text,omitempty"`
	AfterMessageID int64  `json:"after_message_id,omitempty"`
	Email          string `json:"email,omitempty"`
	MessageID      int64  `json:"message_id,omitempty"` // seen
	UserID         string `json:"user_id,omitempty"`    // identify
	Name           string `json:"name,omitempty"`       // identify
	UserHash       string `json:"user_hash,omitempty"`  // identify
	Rating         string `json:"rating,omitempty"`     // rate
	Comment        string `json:"comment,omitempty"`    // rate
	// File is the id of an upload (POST /v1/widget/files) this message carries; its text may
	// then be empty.
	File string `json:"file,omitempty"`
	// A page frame's fields (VisitorContext).
	URL      string `json:"url,omitempty"`
	Title    string `json:"title,omitempty"`
	Referrer string `json:"referrer,omitempty"`
	Language string `json:"language,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// Identified answers an identify: whether it was verified and the conversation the socket
// now speaks for (a verified user's, the same on every device).
type Identified struct {
	Type           string `json:"type"`
	Verified       bool   `json:"verified"`
	ConversationID *int64 `json:"conversation_id"`
	LastMessageID  int64  `json:"last_message_id"`
	ReadMessageID  int64  `json:"read_message_id"`
	SeenMessageID  int64  `json:"seen_message_id"`
	// ConversationStatus and Rating are as in Hello.
	ConversationStatus ConvStatus `json:"conversation_status"`
	Rating             string     `json:"rating"`
}

// Hello is the first frame the server sends.
type Hello struct {
	Type           string `json:"type"`
	Visitor        string `json:"visitor"`
	ConversationID *int64 `json:"conversation_id"`
	LastMessageID  int64  `json:"last_message_id"`
	// ReadMessageID is the visitor's own read marker (the last seen frame it sent, from any
	// tab or device): operator messages after it are unread. SeenMessageID is the operators'
	// (the highest message id an operator has read).
	ReadMessageID int64 `json:"read_message_id"`
	SeenMessageID int64 `json:"seen_message_id"`
	// Site is how the window looks and what it says (office hours and their zone left out);
	// Status is "online" (an operator has the inbox open or replied lately, within the
	// office hours) or "away".
	Site   *WidgetSettings `json:"site"`
	Status string          `json:"status"`
	// ConversationStatus is "open" or "closed" ("" without a conversation); Rating is the
	// visitor's rating of it, "" until rated.
	ConversationStatus ConvStatus `json:"conversation_status"`
	Rating             string     `json:"rating"`
	// OpensAt is when the office hours begin again (RFC 3339), "" within them or without any.
	OpensAt string `json:"opens_at"`
}

// Typing tells a visitor that an operator is writing.
type Typing struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// Seen is a read marker: the operators' to a visitor, the visitor's to the server.
type Seen struct {
	Type      string `json:"type"`
	MessageID int64  `json:"message_id"`
}

// Ack confirms that a message is durably stored.
type Ack struct {
	Type           string    `json:"type"`
	ClientID       string    `json:"client_id"`
	MessageID      int64     `json:"message_id"`
	ConversationID int64     `json:"conversation_id"`
	CreatedAt      time.Time `json:"created_at"`
}

// Message is one stored message as the server shows it (history, resume and live).
type Message struct {
	Type      string    `json:"type"`
	MessageID int64     `json:"message_id"`
	Author    Author    `json:"author"`
	Name      string    `json:"name"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"created_at"`
	ClientID  string    `json:"client_id,omitempty"`
	// File is the attachment, its url a signed link relative to the edge (VisitorLinkTTL).
	File *File `json:"file,omitempty"`
}

// Error answers a frame the server did not accept. The connection stays open.
type Error struct {
	Type         string `json:"type"`
	ClientID     string `json:"client_id,omitempty"`
	Code         string `json:"code"`
	Message      string `json:"message"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// HTTPError is the JSON body of a refused HTTP request (e.g. a websocket upgrade refused with
// 403 or 404).
type HTTPError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
