package lanes

import (
	"encoding/json"
	"testing"
	"time"

	"spookat/schema"
)

func TestAppendResultMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123000, time.UTC)
	for _, r := range []schema.Result{
		{JobID: "m1.slack", Target: "slack", SiteID: 1, ConversationID: 2, MessageID: 1, Status: "delivered", Attempts: 1, ExternalID: "1.000001", ThreadID: "1.000001", At: at},
		{JobID: "m9.webhook", Target: "webhook", SiteID: 7, ConversationID: 8, MessageID: 9, Status: "retrying", Attempts: 3, Error: "http 500: <html>\"oops\"\n\u00e9\x01", At: at.Local()},
		{JobID: "m5.slack", Target: "slack", Status: "delivered", Merged: 4, At: time.Time{}},
		{JobID: "i3.email", Target: "email", SiteID: 7, Status: "dead", Attempts: 5, Error: "550 no such user", InviteID: 3, At: at},
		{JobID: "xab12.webhook", Target: "webhook", SiteID: 7, Status: "delivered", Attempts: 1, Erasure: "ab12", At: at},
	} {
		want, _ := json.Marshal(&r)
		if got := appendResult(nil, &r); string(got) != string(want) {
			t.Errorf("appendResult\n got %s\nwant %s", got, want)
		}
	}
}
