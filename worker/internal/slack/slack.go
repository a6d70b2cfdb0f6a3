// Package slack posts chat jobs to Slack (chat.postMessage): the first message of a
// conversation opens a parent post in the site's channel, every later one replies in its thread.
package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"spookat/schema"
	"spookat/worker/internal/deliver"
	"spookat/worker/internal/threads"
)

// Sender posts to Slack, every site's bot token over one keep-alive client.
type Sender struct {
	api     api
	threads *threads.Store
	limits  *deliver.Limits
	merge   int
	fetch   func(ctx context.Context, site *schema.SiteDelivery, j *schema.Job) error
}

// Options of the sender.
type Options struct {
	APIURL   string           // e.g. https://slack.com/api/
	HTTP     *fasthttp.Client // see NewHTTP
	Threads  *threads.Store
	Pace     time.Duration // posts per channel while rate limited (Slack: ~1/s)
	MergeMax int           // most messages merged into one post
	// Fetch brings in a file posted in a thread (Job.Fetch); nil: such jobs fail for good.
	// An error wrapping deliver.ErrNotFetchable is not tried again.
	Fetch func(ctx context.Context, site *schema.SiteDelivery, j *schema.Job) error
}

// New builds a sender.
func New(o Options) *Sender {
	base := o.APIURL
	if base == "" {
		base = "https://slack.com/api/"
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	if o.Pace <= 0 {
		o.Pace = time.Second
	}
	return &Sender{
		api:     newAPI(base, o.HTTP),
		fetch:   o.Fetch,
		threads: o.Threads,
		limits:  deliver.NewLimits(o.Pace, 10*o.Pace),
		merge:   o.MergeMax,
	}
}

// MergeMax implements deliver.Merger.
func (s *Sender) MergeMax() int { return s.merge }

// Wait implements deliver.Gate: a channel that answered 429 is held back alone.
func (s *Sender) Wait(site *schema.SiteDelivery, _ *schema.Job) (time.Duration, bool) {
	return s.limits.Wait(site.SlackChannel, time.Now())
}

// Send posts jobs (one, or several of one conversation merged) as one message.
func (s *Sender) Send(ctx context.Context, deadline time.Time, site *schema.SiteDelivery, jobs []*schema.Job) deliver.Outcome {
	if site.SlackToken == "" || site.SlackChannel == "" {
		return deliver.Permanent(deliver.ErrNotConfigured)
	}
	j := jobs[0]
	if j.Fetch != nil {
		if s.fetch == nil {
			return deliver.Permanent(deliver.ErrNotConfigured)
		}
		if err := s.fetch(ctx, site, j); err != nil {
			if errors.Is(err, deliver.ErrNotFetchable) {
				return deliver.Permanent(err)
			}
			return deliver.Fail(err)
		}
		return deliver.Outcome{}
	}
	key := schema.ThreadKey(schema.TargetSlack, j.SiteID, j.ConversationID)
	thread, err := s.threads.Get(ctx, key)
	if err != nil {
		return deliver.Fail(fmt.Errorf("read thread: %w", err))
	}
	if j.First && thread != "" && len(jobs) == 1 {
		// The conversation's first message opens the thread and is in its parent post: a
		// thread already there means this job was posted and its ack lost (a worker crashed
		// after storing the thread). Posting it again would put a copy in the thread.
		return deliver.Outcome{ExternalID: thread, ThreadID: thread}
	}
	closed, change := status(jobs)
	if thread == "" && onlyStatus(jobs) {
		// Closed or reopened before its first message reached Slack (the channel was set up
		// later, or that job is in DEAD): there is no thread to mark, and a thread of its
		// own would say nothing.
		return deliver.Outcome{}
	}
	if change && thread != "" {
		// Before the post: a failed reaction retries the job with nothing posted twice.
		if err := s.api.reaction(ctx, deadline, site.SlackToken, site.SlackChannel, thread, doneReaction, closed); err != nil && !cosmetic(err) {
			return s.classify(site, err)
		}
	}
	var b strings.Builder
	parent := thread == ""
	if parent {
		writeParent(&b, site, j)
		jobs = jobs[1:]
	}
	for i, j := range jobs {
		if i > 0 || parent {
			b.WriteByte('\n')
		}
		writeLine(&b, j)
	}
	ts, err := s.api.postMessage(ctx, deadline, site.SlackToken, site.SlackChannel, thread, b.String())
	if err != nil {
		return s.classify(site, err)
	}
	if parent {
		thread = ts
		if err := s.threads.Put(ctx, key, ts); err != nil {
			// The post is out; without the thread id the next message would open a second
			// parent. Retry the job: a duplicate parent beats a lost thread.
			return deliver.Fail(fmt.Errorf("store thread: %w", err))
		}
		if change && closed {
			// The post is out: the ✅ is best effort (its line says the same).
			_ = s.api.reaction(ctx, deadline, site.SlackToken, site.SlackChannel, thread, doneReaction, true)
		}
	}
	return deliver.Outcome{ExternalID: ts, ThreadID: thread}
}

// doneReaction marks a closed conversation's parent post; an operator's own ✅ there closes it
// (the edge's Events API endpoint).
const doneReaction = "white_check_mark"

// status is the conversation's status after jobs, when one of them changes it: a status
// message, or a visitor's message that reopened the conversation.
func status(jobs []*schema.Job) (closed, change bool) {
	for _, j := range jobs {
		switch {
		case j.Kind == schema.KindClosed:
			closed, change = true, true
		case j.Kind == schema.KindReopened || j.Kind == schema.KindSnoozed || j.Reopened:
			closed, change = false, true // snoozed is not done: no ✅
		}
	}
	return closed, change
}

// onlyStatus reports jobs that are all status changes.
func onlyStatus(jobs []*schema.Job) bool {
	for _, j := range jobs {
		if j.Kind.Status() == "" {
			return false
		}
	}
	return true
}

// cosmetic reports a failed reaction that must not hold the status line back: the bot lacks
// the reactions:write scope (an app installed before it was asked for), or the parent post
// is gone. The thread's line still says the status.
func cosmetic(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && (ae.code == "missing_scope" || ae.code == "message_not_found" || ae.code == "no_permission" ||
		ae.code == "not_reactable" || ae.code == "too_many_reactions")
}

// permanent lists Slack errors retrying cannot fix: the job goes to DEAD at once instead of
// retrying for a day.
var permanent = map[string]bool{
	"channel_not_found": true, "invalid_auth": true, "not_authed": true, "account_inactive": true,
	"token_revoked": true, "token_expired": true, "is_archived": true, "not_in_channel": true,
	"missing_scope": true, "no_permission": true, "restricted_action": true, "team_access_not_granted": true,
	"invalid_arguments": true, "msg_too_long": true, "no_text": true, "ekm_access_denied": true,
}

func (s *Sender) classify(site *schema.SiteDelivery, err error) deliver.Outcome {
	var rl *rateLimitedError
	if errors.As(err, &rl) {
		after := max(rl.after, time.Second)
		s.limits.Block(site.SlackChannel, time.Now(), after)
		return deliver.RateLimited(after)
	}
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.code == "ratelimited" {
			s.limits.Block(site.SlackChannel, time.Now(), time.Second)
			return deliver.RateLimited(time.Second)
		}
		if permanent[ae.code] {
			return deliver.Permanent(err)
		}
		return deliver.Fail(err)
	}
	var se *statusError
	if errors.As(err, &se) {
		if se.status >= 400 && se.status < 500 && se.status != fasthttp.StatusRequestTimeout {
			return deliver.Permanent(err)
		}
		return deliver.Fail(err)
	}
	return deliver.Fail(err)
}

// Slack's mrkdwn needs &, < and > escaped in user text; our own link markup stays as is.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func who(j *schema.Job) string {
	name := j.Name
	switch j.Author {
	case "operator":
		if name == "" {
			name = "Operator"
		}
		return name + " (operator)"
	case "system":
		return "System"
	}
	if name == "" {
		name = "Visitor"
	}
	return name
}

func writeParent(b *strings.Builder, site *schema.SiteDelivery, j *schema.Job) {
	b.WriteString(":speech_balloon: New conversation #")
	b.WriteString(strconv.FormatInt(j.ConversationID, 10))
	if site.Name != "" {
		b.WriteString(" on ")
		b.WriteString(escaper.Replace(site.Name))
	}
	if j.InboxURL != "" {
		b.WriteString(" · <")
		b.WriteString(j.InboxURL)
		b.WriteString("|open in inbox>")
	}
	b.WriteByte('\n')
	if c := j.Context; c != nil {
		// Where the visitor started and with what, as Chatlio and Papercups show it.
		b.WriteString(":globe_with_meridians: <")
		b.WriteString(linkURL.Replace(c.URL))
		b.WriteByte('|')
		label := c.Title
		if label == "" {
			label = c.URL
		}
		b.WriteString(linkText.Replace(label))
		b.WriteByte('>')
		for _, f := range c.Facts() {
			b.WriteString(" · ")
			b.WriteString(escaper.Replace(f))
		}
		b.WriteByte('\n')
	}
	writeLine(b, j)
}

// statusEmoji starts a status change's line in the thread.
var statusEmoji = map[schema.MessageKind]string{
	schema.KindClosed: ":white_check_mark:", schema.KindReopened: ":leftwards_arrow_with_hook:", schema.KindSnoozed: ":zzz:",
}

func writeLine(b *strings.Builder, j *schema.Job) {
	if j.MaybeRepeat {
		defer b.WriteString(" _(" + schema.RepeatMark + ")_")
	}
	if emoji, ok := statusEmoji[j.Kind]; ok {
		b.WriteString(emoji)
		b.WriteString(" _")
		b.WriteString(escaper.Replace(j.Text))
		b.WriteByte('_')
		return
	}
	if j.Reopened {
		b.WriteString(":leftwards_arrow_with_hook: _Reopened by the visitor's message_\n")
	}
	b.WriteByte('*')
	b.WriteString(escaper.Replace(who(j)))
	b.WriteString(":* ")
	b.WriteString(escaper.Replace(j.Text))
	if f := j.File; f != nil {
		// A signed link (7 days) rather than Slack's upload flow: the file stays on the
		// edge, and the bot needs no files:write scope.
		b.WriteString("\n:paperclip: <")
		b.WriteString(f.URL)
		b.WriteByte('|')
		b.WriteString(linkText.Replace(f.Name))
		b.WriteString("> (")
		b.WriteString(f.SizeText())
		b.WriteByte(')')
	}
}

// linkURL escapes a link's address for Slack's <url|label>: a page's query is kept as the
// browser sent it, and could hold the characters that end the link.
var linkURL = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C")

// linkText escapes a link's label for Slack's <url|label> (a | or > would end it).
var linkText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "|", "¦")
