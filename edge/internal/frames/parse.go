package frames

import (
	"encoding/json"
	"strconv"
	"strings"

	"spookat/schema"
)

// ParseClient decodes a client frame; the frame's strings do not alias data. The common frame (a flat object of plain strings and
// one integer) is scanned directly; anything else (escapes, other keys, nesting, odd
// spacing) goes to encoding/json, which has the last word on what is valid.
func ParseClient(data []byte, f *schema.ClientFrame) error {
	*f = schema.ClientFrame{}
	if fastParse(data, f) {
		return nil
	}
	*f = schema.ClientFrame{}
	return json.Unmarshal(data, f)
}

func fastParse(b []byte, f *schema.ClientFrame) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		switch key {
		case "type", "client_id", "text":
			v, j, ok := plainString(b, i)
			if !ok {
				return false
			}
			// v points into the read buffer, reused for the next frame: keep copies.
			switch key {
			case "type":
				f.Type = internType(v)
			case "client_id":
				f.ClientID = strings.Clone(v)
			default:
				f.Text = strings.Clone(v)
			}
			i = j
		case "after_message_id":
			j := i
			if j < len(b) && b[j] == '-' {
				j++
			}
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
			if err != nil || (j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E')) {
				return false
			}
			f.AfterMessageID = n
			i = j
		default:
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// plainString reads a JSON string at b[i] that has no escapes and only valid UTF-8 text;
// anything else is left to encoding/json.
func plainString(b []byte, i int) (key string, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if !utf8Valid(s) {
				return "", 0, false
			}
			return unsafeString(s), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

func internType(v string) string {
	switch v {
	case schema.FrameMessage:
		return schema.FrameMessage
	case schema.FrameResume:
		return schema.FrameResume
	}
	return strings.Clone(v)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
