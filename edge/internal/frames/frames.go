// Package frames encodes the server's websocket frames by appending to a buffer: the ack is
// written for every message, so it is built without reflection or allocation beyond the
// frame itself. The shapes are those of spookat/schema, documented in schema/PROTOCOL.md.
package frames

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // control characters, and <>& so a frame is safe to embed in HTML
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendTime appends a Unix-ms time as an RFC 3339 JSON string in UTC with milliseconds.
func AppendTime(b []byte, ms int64) []byte {
	b = append(b, '"')
	b = time.UnixMilli(ms).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, '"')
}

// Ack is {"type":"ack","client_id":…,"message_id":N,"conversation_id":N,"created_at":…}.
func Ack(b []byte, clientID string, messageID, conversationID, createdAt int64) []byte {
	b = append(b, `{"type":"ack","client_id":`...)
	b = AppendString(b, clientID)
	b = append(b, `,"message_id":`...)
	b = strconv.AppendInt(b, messageID, 10)
	b = append(b, `,"conversation_id":`...)
	b = strconv.AppendInt(b, conversationID, 10)
	b = append(b, `,"created_at":`...)
	b = AppendTime(b, createdAt)
	return append(b, '}')
}

// Message is {"type":"message","message_id":N,"author":…,"name":…,"text":…,"created_at":…[,"client_id":…]}.
func Message(b []byte, id int64, author, name, text, clientID string, createdAt int64) []byte {
	b = append(b, `{"type":"message","message_id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"author":`...)
	b = AppendString(b, author)
	b = append(b, `,"name":`...)
	b = AppendString(b, name)
	b = append(b, `,"text":`...)
	b = AppendString(b, text)
	b = append(b, `,"created_at":`...)
	b = AppendTime(b, createdAt)
	if clientID != "" {
		b = append(b, `,"client_id":`...)
		b = AppendString(b, clientID)
	}
	return append(b, '}')
}

// Error is {"type":"error",["client_id":…,]"code":…,"message":…[,"retry_after_ms":N]}.
func Error(b []byte, clientID, code, message string, retryAfterMS int64) []byte {
	b = append(b, `{"type":"error"`...)
	if clientID != "" {
		b = append(b, `,"client_id":`...)
		b = AppendString(b, clientID)
	}
	b = append(b, `,"code":`...)
	b = AppendString(b, code)
	b = append(b, `,"message":`...)
	b = AppendString(b, message)
	if retryAfterMS > 0 {
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, retryAfterMS, 10)
	}
	return append(b, '}')
}

// Hello is {"type":"hello","visitor":…,"conversation_id":N|null,"last_message_id":N}.
func Hello(b []byte, visitor string, conversationID, lastMessageID int64) []byte {
	b = append(b, `{"type":"hello","visitor":`...)
	b = AppendString(b, visitor)
	b = append(b, `,"conversation_id":`...)
	if conversationID == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, conversationID, 10)
	}
	b = append(b, `,"last_message_id":`...)
	b = strconv.AppendInt(b, lastMessageID, 10)
	return append(b, '}')
}
