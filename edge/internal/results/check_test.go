package results

import (
	"testing"

	"spookat/schema"
)

// An invitation's result names the invitation, not a message, and only by its own job id.
func TestCheckShapeOfInvitationResults(t *testing.T) {
	for _, c := range []struct {
		name string
		r    schema.Result
		want string
	}{
		{"an invitation's", schema.Result{JobID: "i3.email", Target: "email", SiteID: 1, InviteID: 3, Status: "delivered"}, ""},
		{"a message's", schema.Result{JobID: "m9.email", Target: "email", SiteID: 1, ConversationID: 2, MessageID: 9, Status: "delivered"}, ""},
		{"another invitation's job id", schema.Result{JobID: "i4.email", Target: "email", InviteID: 3, Status: "delivered"}, RejectMalformed},
		{"both a message and an invitation", schema.Result{JobID: "i3.email", Target: "email", MessageID: 9, InviteID: 3, Status: "delivered"}, RejectMalformed},
		{"an invitation by Slack", schema.Result{JobID: "i3.slack", Target: "slack", InviteID: 3, Status: "delivered"}, RejectMalformed},
		{"an erasure's webhook", schema.Result{JobID: "xab12.webhook", Target: "webhook", SiteID: 1, Erasure: "ab12", Status: "delivered"}, ""},
		{"an erasure by email", schema.Result{JobID: "xab12.email", Target: "email", Erasure: "ab12", Status: "delivered"}, RejectMalformed},
		{"an erasure and a message", schema.Result{JobID: "xab12.webhook", Target: "webhook", MessageID: 3, Erasure: "ab12", Status: "delivered"}, RejectMalformed},
		{"an invitation in a conversation", schema.Result{JobID: "i3.email", Target: "email", ConversationID: 2, InviteID: 3, Status: "delivered"}, RejectMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkShape(&c.r); got != c.want {
				t.Fatalf("checkShape = %q, want %q", got, c.want)
			}
		})
	}
}
