package lanes

import (
	"strconv"
	"time"

	"spookat/schema"
	"spookat/schema/fastjson"
)

// appendResult encodes r as encoding/json would (same fields, names and omitempty), without
// reflection: one result per delivery made json.Marshal show in the worker's profile.
func appendResult(b []byte, r *schema.Result) []byte {
	b = append(b, `{"job_id":`...)
	b = fastjson.AppendString(b, r.JobID)
	b = append(b, `,"target":`...)
	b = fastjson.AppendString(b, r.Target)
	b = append(b, `,"site_id":`...)
	b = strconv.AppendInt(b, r.SiteID, 10)
	b = append(b, `,"conversation_id":`...)
	b = strconv.AppendInt(b, r.ConversationID, 10)
	b = append(b, `,"message_id":`...)
	b = strconv.AppendInt(b, r.MessageID, 10)
	b = append(b, `,"status":`...)
	b = fastjson.AppendString(b, string(r.Status))
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = fastjson.AppendString(b, r.Error)
	}
	if r.ExternalID != "" {
		b = append(b, `,"external_id":`...)
		b = fastjson.AppendString(b, r.ExternalID)
	}
	if r.ThreadID != "" {
		b = append(b, `,"thread_id":`...)
		b = fastjson.AppendString(b, r.ThreadID)
	}
	if r.Merged != 0 {
		b = append(b, `,"merged":`...)
		b = strconv.AppendInt(b, int64(r.Merged), 10)
	}
	b = append(b, `,"at":"`...)
	b = r.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if r.InviteID != 0 {
		b = append(b, `,"invite_id":`...)
		b = strconv.AppendInt(b, r.InviteID, 10)
	}
	if r.Erasure != "" {
		b = append(b, `,"erasure":`...)
		b = fastjson.AppendString(b, r.Erasure)
	}
	if r.Fetch != "" {
		b = append(b, `,"fetch":`...)
		b = fastjson.AppendString(b, r.Fetch)
	}
	if r.Notice != "" {
		b = append(b, `,"notice":`...)
		b = fastjson.AppendString(b, r.Notice)
	}
	return append(b, '}')
}
