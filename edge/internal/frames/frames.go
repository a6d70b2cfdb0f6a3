// Package frames encodes the server's websocket frames by appending to a buffer: the ack is
// written for every message, so it is built without reflection or allocation beyond the
// frame itself. The shapes are those of spookat/schema, documented in schema/PROTOCOL.md.
package frames

import (
	"strconv"
	"time"

	"spookat/schema"
	"spookat/schema/fastjson"
)

// AppendTime appends a Unix-ms time as an RFC 3339 JSON string in UTC with milliseconds.
// Every ack carries one, so it is written digit by digit (the date from the day number by
// H. Hinnant's days-to-civil) rather than through time's layout, which costs several times
// more; times outside years 1970-9999 take time's way.
func AppendTime(b []byte, ms int64) []byte {
	const msPerDay = 86_400_000
	if ms < 0 || ms >= maxFastMs {
		b = append(b, '"')
		b = time.UnixMilli(ms).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
		return append(b, '"')
	}
	day, rest := ms/msPerDay, ms%msPerDay
	b = append(b, '"')
	b = appendDate(b, day)
	b = append(b, 'T')
	b = append2(b, rest/3_600_000)
	b = append(b, ':')
	b = append2(b, rest/60_000%60)
	b = append(b, ':')
	b = append2(b, rest/1000%60)
	b = append(b, '.', byte('0'+rest/100%10), byte('0'+rest/10%10), byte('0'+rest%10), 'Z', '"')
	return b
}

// maxFastMs is 10000-01-01T00:00:00Z: the fast path writes four-digit years.
const maxFastMs = 253_402_300_800_000

func append2(b []byte, v int64) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }

// appendDate appends YYYY-MM-DD of a day counted from 1970-01-01 (0 ≤ day, year ≤ 9999).
func appendDate(b []byte, day int64) []byte {
	z := day + 719_468
	era := z / 146_097
	doe := z - era*146_097
	yoe := (doe - doe/1460 + doe/36_524 - doe/146_096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	b = append2(b, m)
	b = append(b, '-')
	return append2(b, d)
}

// Ack is {"type":"ack","client_id":…,"message_id":N,"conversation_id":N,"created_at":…}.
func Ack(b []byte, clientID string, messageID, conversationID, createdAt int64) []byte {
	b = append(b, `{"type":"ack","client_id":`...)
	b = fastjson.AppendString(b, clientID)
	b = append(b, `,"message_id":`...)
	b = strconv.AppendInt(b, messageID, 10)
	b = append(b, `,"conversation_id":`...)
	b = strconv.AppendInt(b, conversationID, 10)
	b = append(b, `,"created_at":`...)
	b = AppendTime(b, createdAt)
	return append(b, '}')
}

// Message is {"type":"message","message_id":N,"author":…,"name":…,"text":…,"created_at":…[,"client_id":…][,"file":{…}]}.
func Message(b []byte, id int64, author schema.Author, name, text, clientID string, createdAt int64, file *schema.File) []byte {
	b = append(b, `{"type":"message","message_id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"author":`...)
	b = fastjson.AppendString(b, string(author))
	b = append(b, `,"name":`...)
	b = fastjson.AppendString(b, name)
	b = append(b, `,"text":`...)
	b = fastjson.AppendString(b, text)
	b = append(b, `,"created_at":`...)
	b = AppendTime(b, createdAt)
	if clientID != "" {
		b = append(b, `,"client_id":`...)
		b = fastjson.AppendString(b, clientID)
	}
	return append(schema.AppendFile(b, file), '}')
}

// VisitorClientID is the client id a visitor may see of a message: its own (every visitor
// message of a conversation is its own), never an operator's or a Slack reply's.
func VisitorClientID(author schema.Author, clientID string) string {
	if author == schema.AuthorVisitor {
		return clientID
	}
	return ""
}

// Error is {"type":"error",["client_id":…,]"code":…,"message":…[,"retry_after_ms":N]}.
func Error(b []byte, clientID, code, message string, retryAfterMS int64) []byte {
	b = append(b, `{"type":"error"`...)
	if clientID != "" {
		b = append(b, `,"client_id":`...)
		b = fastjson.AppendString(b, clientID)
	}
	b = append(b, `,"code":`...)
	b = fastjson.AppendString(b, code)
	b = append(b, `,"message":`...)
	b = fastjson.AppendString(b, message)
	if retryAfterMS > 0 {
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, retryAfterMS, 10)
	}
	return append(b, '}')
}

// ConversationState is what hello and identified tell a window of the conversation its socket
// speaks for (schema.Hello, schema.Identified).
type ConversationState struct {
	ID            int64 // 0: none yet (sent as null)
	LastMessageID int64
	ReadMessageID int64 // the visitor's read marker
	SeenMessageID int64 // the operators'
	Status        schema.ConvStatus
	Rating        string
	HasEmail      bool // the visitor's email is on record: the window does not ask for it
}

// appendConversation appends ,"conversation_id":N|null,"last_message_id":N,"read_message_id":N,
// "seen_message_id":N,"conversation_status":…,"rating":…,"has_email":bool.
func appendConversation(b []byte, c ConversationState) []byte {
	b = append(b, `,"conversation_id":`...)
	if c.ID == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, c.ID, 10)
	}
	b = append(b, `,"last_message_id":`...)
	b = strconv.AppendInt(b, c.LastMessageID, 10)
	b = append(b, `,"read_message_id":`...)
	b = strconv.AppendInt(b, c.ReadMessageID, 10)
	b = append(b, `,"seen_message_id":`...)
	b = strconv.AppendInt(b, c.SeenMessageID, 10)
	b = append(b, `,"conversation_status":`...)
	b = fastjson.AppendString(b, string(c.Status))
	b = append(b, `,"rating":`...)
	b = fastjson.AppendString(b, c.Rating)
	b = append(b, `,"has_email":`...)
	b = strconv.AppendBool(b, c.HasEmail)
	return b
}

// Hello is {"type":"hello","visitor":…,<the conversation's state>,"site":{…},"status":…,"opens_at":…}.
// site is the JSON of the window's settings.
func Hello(b []byte, visitor string, c ConversationState, site []byte, status, opensAt string) []byte {
	b = append(b, `{"type":"hello","visitor":`...)
	b = fastjson.AppendString(b, visitor)
	b = appendConversation(b, c)
	b = append(b, `,"site":`...)
	if len(site) == 0 {
		site = []byte("{}")
	}
	b = append(b, site...)
	b = append(b, `,"status":`...)
	b = fastjson.AppendString(b, status)
	b = append(b, `,"opens_at":`...)
	b = fastjson.AppendString(b, opensAt)
	return append(b, '}')
}

// TranscriptDelivery is {"type":"transcript_delivery","status":"delivered"|"failed"}: the
// transcript email the visitor asked for reached the mail server, or will not (its attempts
// are used up).
func TranscriptDelivery(b []byte, delivered bool) []byte {
	if delivered {
		return append(b, `{"type":"transcript_delivery","status":"delivered"}`...)
	}
	return append(b, `{"type":"transcript_delivery","status":"failed"}`...)
}

// Presence is {"type":"presence","status":"online"|"away","opens_at":…}: the site's
// operators came or went since the hello (or its office hours began or ended).
func Presence(b []byte, status, opensAt string) []byte {
	b = append(b, `{"type":"presence","status":`...)
	b = fastjson.AppendString(b, status)
	b = append(b, `,"opens_at":`...)
	b = fastjson.AppendString(b, opensAt)
	return append(b, '}')
}

// Conversation is {"type":"conversation","status":"open"|"closed"}: an operator closed or
// reopened the visitor's conversation.
func Conversation(b []byte, status schema.ConvStatus) []byte {
	b = append(b, `{"type":"conversation","status":`...)
	b = fastjson.AppendString(b, string(status))
	return append(b, '}')
}

// Identified is {"type":"identified","verified":bool,<the conversation's state>}.
func Identified(b []byte, verified bool, c ConversationState) []byte {
	b = append(b, `{"type":"identified","verified":`...)
	b = strconv.AppendBool(b, verified)
	b = appendConversation(b, c)
	return append(b, '}')
}

// Typing is {"type":"typing","name":…}: an operator is writing to the visitor.
func Typing(b []byte, name string) []byte {
	b = append(b, `{"type":"typing","name":`...)
	b = fastjson.AppendString(b, name)
	return append(b, '}')
}

// Seen is {"type":"seen","message_id":N}: an operator has read the conversation up to N.
func Seen(b []byte, messageID int64) []byte {
	b = append(b, `{"type":"seen","message_id":`...)
	b = strconv.AppendInt(b, messageID, 10)
	return append(b, '}')
}

// OperatorMessage is a message as operators see it: in the inbox's REST answers and in its
// websocket's message events.
type OperatorMessage struct {
	ID        int64         `json:"id"`
	Author    schema.Author `json:"author"`
	Name      string        `json:"name"`
	Text      string        `json:"text"`
	Internal  bool          `json:"internal"`
	CreatedAt int64         `json:"created_at"`
	// File is the attachment, its url the inbox's own route (/v1/api/files/{id}, with the
	// operator's session or token).
	File *schema.File `json:"file,omitempty"`
	// Kind is what a system message is: closed and reopened are status changes (internal).
	Kind schema.MessageKind `json:"kind,omitempty"`
	// Reopened: this visitor's message reopened the closed conversation.
	Reopened bool `json:"reopened,omitempty"`
}

// InboxMessage is the operator websocket's message event:
// {"type":"message","site_id":N,"conversation_id":N[,"first":true],"message":{…OperatorMessage}}.
// Every message a watched site stores is one of these, so it is built without reflection.
func InboxMessage(b []byte, siteID, conversationID int64, first bool, m *OperatorMessage) []byte {
	b = append(b, `{"type":"message","site_id":`...)
	b = strconv.AppendInt(b, siteID, 10)
	b = append(b, `,"conversation_id":`...)
	b = strconv.AppendInt(b, conversationID, 10)
	if first {
		b = append(b, `,"first":true`...)
	}
	b = append(b, `,"message":{"id":`...)
	b = strconv.AppendInt(b, m.ID, 10)
	b = append(b, `,"author":`...)
	b = fastjson.AppendString(b, string(m.Author))
	b = append(b, `,"name":`...)
	b = fastjson.AppendString(b, m.Name)
	b = append(b, `,"text":`...)
	b = fastjson.AppendString(b, m.Text)
	b = append(b, `,"internal":`...)
	b = strconv.AppendBool(b, m.Internal)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, m.CreatedAt, 10)
	b = schema.AppendFile(b, m.File)
	if m.Kind != "" {
		b = append(b, `,"kind":`...)
		b = fastjson.AppendString(b, string(m.Kind))
	}
	if m.Reopened {
		b = append(b, `,"reopened":true`...)
	}
	return append(b, `}}`...)
}
