package frames

import (
	"spookat/schema"
	"spookat/schema/fastjson"
)

// ParseClient decodes a client frame; the frame's strings do not alias data. The usual frame
// (a flat object of the frame's own keys) is read directly; anything else (other keys,
// nesting, a value of another type) goes to encoding/json, which has the last word on what is
// valid.
func ParseClient(data []byte, f *schema.ClientFrame) error {
	return fastjson.Decode(data, f, field)
}

func field(f *schema.ClientFrame, b, key []byte, i int) (next int, ok bool) {
	switch string(key) {
	case "type":
		var v []byte
		if v, next, ok = fastjson.Plain(b, i); ok {
			f.Type = internType(v)
		}
	case "client_id":
		f.ClientID, next, ok = fastjson.String(b, i)
	case "text":
		f.Text, next, ok = fastjson.String(b, i)
	case "after_message_id":
		f.AfterMessageID, next, ok = fastjson.Int(b, i)
	case "message_id":
		f.MessageID, next, ok = fastjson.Int(b, i)
	case "email":
		f.Email, next, ok = fastjson.String(b, i)
	case "user_id":
		f.UserID, next, ok = fastjson.String(b, i)
	case "name":
		f.Name, next, ok = fastjson.String(b, i)
	case "user_hash":
		f.UserHash, next, ok = fastjson.String(b, i)
	case "rating":
		f.Rating, next, ok = fastjson.String(b, i)
	case "comment":
		f.Comment, next, ok = fastjson.String(b, i)
	case "file":
		f.File, next, ok = fastjson.String(b, i)
	case "url":
		f.URL, next, ok = fastjson.String(b, i)
	case "title":
		f.Title, next, ok = fastjson.String(b, i)
	case "referrer":
		f.Referrer, next, ok = fastjson.String(b, i)
	case "language":
		f.Language, next, ok = fastjson.String(b, i)
	case "time_zone":
		f.TimeZone, next, ok = fastjson.String(b, i)
	}
	return next, ok // any other key: encoding/json decides
}

// internType returns the frame types without allocating.
func internType(v []byte) string {
	switch string(v) {
	case schema.FrameMessage:
		return schema.FrameMessage
	case schema.FrameResume:
		return schema.FrameResume
	case schema.FrameTyping:
		return schema.FrameTyping
	case schema.FrameSeen:
		return schema.FrameSeen
	}
	return string(v)
}
