package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"spookat/schema/fastjson"
)

// Lanes: each has its own in-flight limit in the worker, so a slow webhook receiver never
// delays a chat post.
const (
	LaneChat    = "chat"
	LaneWebhook = "webhook"
	LaneEmail   = "email"
)

// Delivery targets.
const (
	TargetSlack   = "slack"
	TargetDiscord = "discord"
	TargetWebhook = "webhook"
	TargetEmail   = "email"
)

// LaneOf returns the lane a target's jobs travel in.
func LaneOf(target string) string {
	switch target {
	case TargetSlack, TargetDiscord:
		return LaneChat
	case TargetWebhook:
		return LaneWebhook
	default:
		return LaneEmail
	}
}

// Job is one delivery of one message to one target. It carries what the worker needs to do
// the delivery except secrets: those stay in the SITES key-value bucket (see SiteDelivery), so
// `nats stream get JOBS` shows no token.
type Job struct {
	ID             string    `json:"id"` // JobID(message, target); also the Nats-Msg-Id
	Lane           string    `json:"lane"`
	Target         string    `json:"target"`
	SiteID         int64     `json:"site_id"`
	ConversationID int64     `json:"conversation_id"`
	MessageID      int64     `json:"message_id"`
	Author         Author    `json:"author"`
	Name           string    `json:"name,omitempty"`
	Text           string    `json:"text"`
	CreatedAt      time.Time `json:"created_at"`
	// Kind is what a system message is ("" for a message someone wrote).
	Kind MessageKind `json:"kind,omitempty"`
	// First is true for the first message of a conversation: it opens the Slack thread and
	// triggers the new-conversation email.
	First bool `json:"first,omitempty"`
	// Reopened is set on a visitor's message that reopened a closed conversation (the Slack
	// thread's parent loses its ✅).
	Reopened bool `json:"reopened,omitempty"`
	// InboxURL links the operator to the conversation in the web inbox.
	InboxURL string `json:"inbox_url,omitempty"`
	// To is set on an email job that carries an operator's reply to a visitor who was not
	// connected and left an address; without it, an email job notifies the site's address of
	// a new conversation.
	To string `json:"to,omitempty"`
	// File is the message's attachment, its URL a signed link (files.LinkTTL) that works
	// without a login; nil for none.
	File *File `json:"file,omitempty"`
	// Context is the page the conversation started on and the visitor's browser, on the jobs
	// of its first message (nil when the widget did not say).
	Context *VisitorContext `json:"context,omitempty"`
	// Transcript is set on the email job of a transcript request (To is the visitor): the
	// conversation as the visitor saw it, without internal notes.
	Transcript *Transcript `json:"transcript,omitempty"`
	// MaybeRepeat says the job may have been delivered before: the edge published it again
	// after a crash (its replay), or JetStream had handed it to a worker before (the worker
	// sets it; a power cut can take a worker's acknowledgements with it). A chat post of such
	// a job is marked as a possible repeat; a webhook repeats its webhook-id.
	MaybeRepeat bool `json:"maybe_repeat,omitempty"`
	// Invite is set on the email job of an owner's invitation to join a site (To is the
	// invitee); such a job belongs to no conversation or message (MessageID 0) and its result
	// carries Invite.ID.
	Invite *Invite `json:"invite,omitempty"`
	// Erasure is set on the webhook job that tells a site's receiver a person was erased
	// (MessageID 0); its result carries Erasure.Ref.
	Erasure *Erasure `json:"erasure,omitempty"`
	// Fetch is set on the chat job that fetches a file an operator posted in a conversation's
	// Slack thread (MessageID 0): the worker downloads it with the site's bot token and hands
	// it to the edge on INBOUND; its result carries FetchRef(Fetch.ID).
	Fetch *Fetch `json:"fetch,omitempty"`
	// Notice is set on the email job that tells a site's notify address something about the
	// site itself (its plan's limit reached; MessageID 0); its result carries Notice.Ref.
	Notice *Notice `json:"notice,omitempty"`
}

// Notice is an email to a site's operators about the site.
type Notice struct {
	Ref     string `json:"ref"` // in its job's id: one email per ref
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

// NoticeJobID is the id of a notice's email job (and its Nats-Msg-Id).
func NoticeJobID(ref string) string { return "n" + ref + "." + TargetEmail }

// Fetch is a file posted outside (Slack) for the worker to bring in.
type Fetch struct {
	ID       string `json:"id"`     // the Inbound id it becomes: slack:<channel>:<ts>:<file id>
	URL      string `json:"url"`    // Slack's url_private_download
	Thread   string `json:"thread"` // the conversation's Slack thread
	Author   string `json:"author"`
	Name     string `json:"name"`
	Type     string `json:"type,omitempty"`
	Size     int64  `json:"size"`
	Internal bool   `json:"internal,omitempty"`
}

// FetchRef is a fetch's reference in its job id and result: a token of the Inbound id.
func FetchRef(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:12])
}

// FetchJobID is the id of a fetch's job (and its Nats-Msg-Id).
func FetchJobID(id string) string { return "f" + FetchRef(id) + "." + TargetSlack }

// Erasure says which person a site erased, so a receiver can erase its own copies: the
// ids it got in earlier events, and the email or user id it was asked by.
type Erasure struct {
	Ref             string    `json:"ref"` // the erasure's id (random), in its job's id
	Email           string    `json:"email,omitempty"`
	UserID          string    `json:"user_id,omitempty"`
	VisitorIDs      []int64   `json:"visitor_ids"`
	ConversationIDs []int64   `json:"conversation_ids"`
	At              time.Time `json:"at"`
}

// ErasureJobID is the id of an erasure's webhook job (and its Nats-Msg-Id).
func ErasureJobID(ref string) string { return "x" + ref + "." + TargetWebhook }

// Invite is an invitation to join a site's team, as its email says it. Link holds the
// single-use token: it travels in JOBS until the email is sent (the edge keeps only its
// hash), and it expires with the invitation.
type Invite struct {
	ID      int64     `json:"id"`
	Site    string    `json:"site"` // the site's name
	By      string    `json:"by"`   // the owner who invited, by name or email
	Role    string    `json:"role"` // owner or agent
	Link    string    `json:"link"`
	Expires time.Time `json:"expires"`
}

// InviteJobID is the id of an invitation's email job (and its Nats-Msg-Id).
func InviteJobID(inviteID int64) string {
	return "i" + strconv.FormatInt(inviteID, 10) + "." + TargetEmail
}

// RepeatMark ends the line of a chat post whose job may have been posted before
// (Job.MaybeRepeat), so an operator reading two copies knows which one to ignore.
const RepeatMark = "↻ possible repeat"

// Transcript is a conversation as emailed to its visitor.
type Transcript struct {
	Lines []TranscriptLine `json:"lines"`
	// Earlier is how many earlier messages were left out (MaxTranscriptLines, MaxTranscriptBytes).
	Earlier int `json:"earlier,omitempty"`
}

// TranscriptLine is one message of a transcript.
type TranscriptLine struct {
	Author Author    `json:"author"`
	Name   string    `json:"name,omitempty"`
	Text   string    `json:"text"`
	File   string    `json:"file,omitempty"` // an attachment's name
	At     time.Time `json:"at"`
}

// A transcript holds at most the last MaxTranscriptLines messages and MaxTranscriptBytes of
// text, so that its job stays far under NATS's 1 MB payload.
const (
	MaxTranscriptLines = 500
	MaxTranscriptBytes = 256 << 10
)

// DecodeJob reads a job as encoding/json would, without reflection when it can: the worker
// decodes one per delivery.
func DecodeJob(b []byte, j *Job) error {
	return fastjson.Decode(b, j, (*Job).field)
}

var jobFields = []string{"id", "lane", "target", "site_id", "conversation_id", "message_id", "author",
	"name", "text", "created_at", "kind", "first", "reopened", "inbox_url", "to", "file", "context", "transcript", "maybe_repeat", "invite", "erasure", "fetch", "notice"}

func (j *Job) field(b, key []byte, i int) (int, bool) {
	if next, ok := fastjson.Null(b, i); ok {
		return next, !fastjson.Unknown(key, "created_at") // a null time is encoding/json's to judge
	}
	var ok bool
	switch string(key) {
	case "id":
		j.ID, i, ok = fastjson.String(b, i)
	case "lane":
		j.Lane, i, ok = fastjson.String(b, i)
	case "target":
		j.Target, i, ok = fastjson.String(b, i)
	case "site_id":
		j.SiteID, i, ok = fastjson.Int(b, i)
	case "conversation_id":
		j.ConversationID, i, ok = fastjson.Int(b, i)
	case "message_id":
		j.MessageID, i, ok = fastjson.Int(b, i)
	case "author":
		var s string
		s, i, ok = fastjson.String(b, i)
		j.Author = Author(s)
	case "name":
		j.Name, i, ok = fastjson.String(b, i)
	case "text":
		j.Text, i, ok = fastjson.String(b, i)
	case "kind":
		var k string
		k, i, ok = fastjson.String(b, i)
		j.Kind = MessageKind(k)
	case "first":
		j.First, i, ok = fastjson.Bool(b, i)
	case "reopened":
		j.Reopened, i, ok = fastjson.Bool(b, i)
	case "inbox_url":
		j.InboxURL, i, ok = fastjson.String(b, i)
	case "to":
		j.To, i, ok = fastjson.String(b, i)
	case "maybe_repeat":
		j.MaybeRepeat, i, ok = fastjson.Bool(b, i)
	case "created_at":
		var s string
		if s, i, ok = fastjson.String(b, i); ok {
			ok = j.CreatedAt.UnmarshalText([]byte(s)) == nil // what encoding/json calls
		}
	default:
		if !fastjson.Unknown(key, jobFields...) {
			return i, false
		}
		i, ok = fastjson.SkipValue(b, i)
	}
	return i, ok
}

// AppendJob encodes j as encoding/json would (same fields, names and omitempty), without
// reflection: the edge encodes one per message and target.
func AppendJob(b []byte, j *Job) []byte {
	b = append(b, `{"id":`...)
	b = fastjson.AppendString(b, j.ID)
	b = append(b, `,"lane":`...)
	b = fastjson.AppendString(b, j.Lane)
	b = append(b, `,"target":`...)
	b = fastjson.AppendString(b, j.Target)
	b = append(b, `,"site_id":`...)
	b = strconv.AppendInt(b, j.SiteID, 10)
	b = append(b, `,"conversation_id":`...)
	b = strconv.AppendInt(b, j.ConversationID, 10)
	b = append(b, `,"message_id":`...)
	b = strconv.AppendInt(b, j.MessageID, 10)
	b = append(b, `,"author":`...)
	b = fastjson.AppendString(b, string(j.Author))
	if j.Name != "" {
		b = append(b, `,"name":`...)
		b = fastjson.AppendString(b, j.Name)
	}
	b = append(b, `,"text":`...)
	b = fastjson.AppendString(b, j.Text)
	b = append(b, `,"created_at":"`...)
	b = j.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if j.Kind != "" {
		b = append(b, `,"kind":`...)
		b = fastjson.AppendString(b, string(j.Kind))
	}
	if j.First {
		b = append(b, `,"first":true`...)
	}
	if j.Reopened {
		b = append(b, `,"reopened":true`...)
	}
	if j.InboxURL != "" {
		b = append(b, `,"inbox_url":`...)
		b = fastjson.AppendString(b, j.InboxURL)
	}
	if j.To != "" {
		b = append(b, `,"to":`...)
		b = fastjson.AppendString(b, j.To)
	}
	b = AppendFile(b, j.File)
	// The rare nested fields, through encoding/json (plain strings, ints, bools and times:
	// it cannot fail): a first message's context, a transcript, an invitation, an erasure's
	// webhook, a fetch from Slack, a notice.
	if j.Context != nil {
		b = appendJSON(b, "context", j.Context)
	}
	if j.Transcript != nil {
		b = appendJSON(b, "transcript", j.Transcript)
	}
	if j.MaybeRepeat {
		b = append(b, `,"maybe_repeat":true`...)
	}
	if j.Invite != nil {
		b = appendJSON(b, "invite", j.Invite)
	}
	if j.Erasure != nil {
		b = appendJSON(b, "erasure", j.Erasure)
	}
	if j.Fetch != nil {
		b = appendJSON(b, "fetch", j.Fetch)
	}
	if j.Notice != nil {
		b = appendJSON(b, "notice", j.Notice)
	}
	return append(b, '}')
}

// appendJSON appends ,"key": and v as encoding/json writes it.
func appendJSON(b []byte, key string, v any) []byte {
	j, _ := json.Marshal(v)
	b = append(append(append(b, `,"`...), key...), `":`...)
	return append(b, j...)
}

// JobID is deterministic, so a job published twice (after a crash) is one job to JetStream's
// duplicate window and one row to the edge.
func JobID(messageID int64, target string) string {
	return "m" + strconv.FormatInt(messageID, 10) + "." + target
}

// Headers a worker sets on a job it moves to DEAD, so `nats stream get DEAD` says why.
const (
	HeaderError    = "Spookat-Error"    // the last error, one line
	HeaderAttempts = "Spookat-Attempts" // delivery attempts made
	HeaderTarget   = "Spookat-Target"   // slack | discord | webhook | email
)

// DeliveryStatus is where a delivery stands, as a Result reports it and deliveries.status
// stores it.
type DeliveryStatus string

// Delivery statuses.
const (
	StatusDelivered DeliveryStatus = "delivered"
	StatusRetrying  DeliveryStatus = "retrying"
	StatusDead      DeliveryStatus = "dead"
)

// Result is what a worker learnt from one delivery attempt; the edge records it in SQLite.
type Result struct {
	JobID          string         `json:"job_id"`
	Target         string         `json:"target"`
	SiteID         int64          `json:"site_id"`
	ConversationID int64          `json:"conversation_id"`
	MessageID      int64          `json:"message_id"`
	Status         DeliveryStatus `json:"status"`
	Attempts       int            `json:"attempts"`
	Error          string         `json:"error,omitempty"`
	ExternalID     string         `json:"external_id,omitempty"` // Slack ts, Discord message id
	ThreadID       string         `json:"thread_id,omitempty"`   // Slack thread ts / Discord thread id of the conversation
	// Merged counts the messages that went out in the same post as this one (Slack merges a
	// thread's queued posts when its channel is rate limited); 0 or 1 means a post of its own.
	Merged int       `json:"merged,omitempty"`
	At     time.Time `json:"at"`
	// InviteID is set (and MessageID 0) on the result of an invitation's email (Job.Invite).
	InviteID int64 `json:"invite_id,omitempty"`
	// Erasure is set (and MessageID 0) on the result of an erasure's webhook (Job.Erasure).
	Erasure string `json:"erasure,omitempty"`
	// Fetch is set (and MessageID 0) on the result of a fetch (Job.Fetch): FetchRef.
	Fetch string `json:"fetch,omitempty"`
	// Notice is set (and MessageID 0) on the result of a notice's email (Job.Notice).
	Notice string `json:"notice,omitempty"`
}

// DecodeResults appends the results of one RESULTS message to dst: a worker batches the
// results it produces within a few milliseconds into one message, one JSON object per line.
// A line that does not decode is reported through bad and skipped.
func DecodeResults(dst []Result, data []byte, bad func(line []byte, err error)) []Result {
	eachLine(data, func(line []byte) {
		var r Result
		err := DecodeResult(line, &r)
		if err == nil && (subjects(&r) != 1 || r.Target == "" || r.JobID == "") {
			err = errors.New("missing job_id, target, or one of message_id, invite_id, erasure, fetch and notice")
		}
		if err != nil {
			if bad != nil {
				bad(line, err)
			}
			return
		}
		dst = append(dst, r)
	})
	return dst
}

// subjects counts what a result is about: a message, an invitation, an erasure (one only).
func subjects(r *Result) int {
	n := 0
	for _, set := range []bool{r.MessageID != 0, r.InviteID != 0, r.Erasure != "", r.Fetch != "", r.Notice != ""} {
		if set {
			n++
		}
	}
	return n
}

// DecodeResult reads a result as encoding/json would, without reflection when it can: the
// edge decodes one per delivery.
func DecodeResult(b []byte, r *Result) error {
	return fastjson.Decode(b, r, (*Result).field)
}

var resultFields = []string{"job_id", "target", "site_id", "conversation_id", "message_id", "status",
	"attempts", "error", "external_id", "thread_id", "merged", "at", "invite_id", "erasure", "fetch", "notice"}

func (r *Result) field(b, key []byte, i int) (int, bool) {
	if next, ok := fastjson.Null(b, i); ok {
		return next, !fastjson.Unknown(key, "at") // a null time is encoding/json's to judge
	}
	var ok bool
	var n int64
	switch string(key) {
	case "job_id":
		r.JobID, i, ok = fastjson.String(b, i)
	case "target":
		r.Target, i, ok = fastjson.String(b, i)
	case "site_id":
		r.SiteID, i, ok = fastjson.Int(b, i)
	case "conversation_id":
		r.ConversationID, i, ok = fastjson.Int(b, i)
	case "message_id":
		r.MessageID, i, ok = fastjson.Int(b, i)
	case "status":
		var s string
		s, i, ok = fastjson.String(b, i)
		r.Status = DeliveryStatus(s)
	case "attempts":
		n, i, ok = fastjson.Int(b, i)
		r.Attempts = int(n)
	case "error":
		r.Error, i, ok = fastjson.String(b, i)
	case "external_id":
		r.ExternalID, i, ok = fastjson.String(b, i)
	case "thread_id":
		r.ThreadID, i, ok = fastjson.String(b, i)
	case "merged":
		n, i, ok = fastjson.Int(b, i)
		r.Merged = int(n)
	case "invite_id":
		r.InviteID, i, ok = fastjson.Int(b, i)
	case "erasure":
		r.Erasure, i, ok = fastjson.String(b, i)
	case "fetch":
		r.Fetch, i, ok = fastjson.String(b, i)
	case "notice":
		r.Notice, i, ok = fastjson.String(b, i)
	case "at":
		var s string
		if s, i, ok = fastjson.String(b, i); ok {
			ok = r.At.UnmarshalText([]byte(s)) == nil // what encoding/json calls
		}
	default:
		if !fastjson.Unknown(key, resultFields...) {
			return i, false
		}
		i, ok = fastjson.SkipValue(b, i)
	}
	return i, ok
}

// SiteDelivery is a site's delivery settings as workers read them from the SITES bucket
// (key SiteKey(id), signed: see SignSite). The edge keeps it current whenever a site changes.
type SiteDelivery struct {
	// Signed is when the edge signed this value (Unix ns): a worker keeps the newest it saw.
	Signed         int64  `json:"signed"`
	SiteID         int64  `json:"site_id"`
	Name           string `json:"name"`
	SlackToken     string `json:"slack_token,omitempty"`
	SlackChannel   string `json:"slack_channel,omitempty"`
	DiscordWebhook string `json:"discord_webhook,omitempty"`
	// DiscordBotToken lets a worker hold the Discord gateway for the site: operators' replies
	// in its threads come back (INBOUND).
	DiscordBotToken string `json:"discord_bot_token,omitempty"`
	WebhookURL      string `json:"webhook_url,omitempty"`
	WebhookSecret   string `json:"webhook_secret,omitempty"`
	NotifyEmail     string `json:"notify_email,omitempty"`
}

// Targets lists the delivery targets a message of this site has. A site with none gets no jobs.
func (d *SiteDelivery) Targets(first bool) []string {
	var t []string
	if d.SlackToken != "" && d.SlackChannel != "" {
		t = append(t, TargetSlack)
	}
	if d.DiscordWebhook != "" {
		t = append(t, TargetDiscord)
	}
	if d.WebhookURL != "" {
		t = append(t, TargetWebhook)
	}
	if first && d.NotifyEmail != "" {
		t = append(t, TargetEmail)
	}
	return t
}
