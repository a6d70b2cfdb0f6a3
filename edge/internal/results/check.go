package results

import (
	"time"
	"unicode/utf8"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Why a result was refused: the label of spookat_results_rejected_total. A worker's identity
// lets it publish results, not choose what they say: each one must describe a job the edge
// could have published.
const (
	RejectMalformed    = "malformed"             // not a result: bad status, target, job id or oversized field
	RejectUnknown      = "unknown_message"       // no such message
	RejectConversation = "conversation_mismatch" // the message is in another conversation
	RejectSite         = "site_mismatch"         // the conversation belongs to another site
	RejectTarget       = "target_not_configured" // the site has no such delivery target
	RejectInvite       = "unknown_invite"        // no such invitation of the site (withdrawn, or forged)
)

// Reasons lists every reason, so each series exists from the start.
var Reasons = []string{RejectMalformed, RejectUnknown, RejectConversation, RejectSite, RejectTarget, RejectInvite}

const (
	maxErrorLen = 1000 // bytes of a result's error kept (the inbox shows it)
	maxIDLen    = 64   // a Slack ts or a Discord snowflake is far shorter
)

// checkShape refuses what no worker of ours produces, and trims an error text to what the
// inbox shows.
func checkShape(r *schema.Result) string {
	switch r.Status {
	case schema.StatusDelivered, schema.StatusRetrying, schema.StatusDead:
	default:
		return RejectMalformed
	}
	switch r.Target {
	case schema.TargetSlack, schema.TargetDiscord, schema.TargetWebhook, schema.TargetEmail:
	default:
		return RejectMalformed
	}
	switch {
	case r.InviteID != 0: // an invitation's email: no message, no conversation
		if r.InviteID < 0 || r.MessageID != 0 || r.ConversationID != 0 || r.Erasure != "" || r.Target != schema.TargetEmail || r.JobID != schema.InviteJobID(r.InviteID) {
			return RejectMalformed
		}
	case r.Erasure != "": // an erasure's webhook: nothing to record but that it went
		if !token(r.Erasure) || r.MessageID != 0 || r.ConversationID != 0 || r.Target != schema.TargetWebhook || r.JobID != schema.ErasureJobID(r.Erasure) {
			return RejectMalformed
		}
	case r.Notice != "": // a notice's email to a site's operators: nothing to record
		if !token(r.Notice) || r.MessageID != 0 || r.ConversationID != 0 || r.Target != schema.TargetEmail || r.JobID != schema.NoticeJobID(r.Notice) {
			return RejectMalformed
		}
	case r.Fetch != "": // a file fetched from Slack: what it brought comes on INBOUND
		if !token(r.Fetch) || r.MessageID != 0 || r.Target != schema.TargetSlack || r.JobID != "f"+r.Fetch+"."+schema.TargetSlack {
			return RejectMalformed
		}
	case r.MessageID <= 0 || r.JobID != schema.JobID(r.MessageID, r.Target):
		return RejectMalformed
	}
	if r.Attempts < 0 || r.Attempts > 1_000_000 {
		return RejectMalformed
	}
	if !token(r.ExternalID) || !token(r.ThreadID) {
		return RejectMalformed
	}
	if len(r.Error) > maxErrorLen {
		cut := maxErrorLen
		for cut > 0 && !utf8.RuneStart(r.Error[cut]) {
			cut--
		}
		r.Error = r.Error[:cut] + "…"
	}
	return ""
}

// token: short printable ASCII without spaces, as ids at Slack and Discord are.
func token(s string) bool {
	if len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// checkOrigin holds a result to the stored message: same conversation, same site, and a
// target the site has (an email goes to the site's notify address, or carries an operator's
// reply or a transcript to the visitor).
func checkOrigin(r *schema.Result, o store.MessageOrigin, found bool, d *schema.SiteDelivery) string {
	switch {
	case !found:
		return RejectUnknown
	case o.ConversationID != r.ConversationID:
		return RejectConversation
	case o.SiteID != r.SiteID:
		return RejectSite
	case d == nil:
		return RejectTarget
	}
	switch r.Target {
	case schema.TargetSlack:
		if d.SlackToken == "" || d.SlackChannel == "" {
			return RejectTarget
		}
	case schema.TargetDiscord:
		if d.DiscordWebhook == "" {
			return RejectTarget
		}
	case schema.TargetWebhook:
		if d.WebhookURL == "" {
			return RejectTarget
		}
	case schema.TargetEmail:
		if d.NotifyEmail == "" && o.Author != schema.AuthorOperator && o.Kind != schema.KindTranscript {
			return RejectTarget
		}
	}
	return ""
}

// logLimit lets one log line per reason through per minute: a worker gone wrong (or
// stolen credentials) cannot flood the log.
type logLimit struct {
	last map[string]time.Time
}

func (l *logLimit) allow(reason string, now time.Time) bool {
	if l.last == nil {
		l.last = make(map[string]time.Time)
	}
	if t, ok := l.last[reason]; ok && now.Sub(t) < time.Minute {
		return false
	}
	l.last[reason] = now
	return true
}
