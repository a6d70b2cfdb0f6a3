// Package slack posts chat jobs to Slack with slack-go (chat.postMessage): the first message of a
// conversation opens a parent post in the site's channel, every later one replies in its thread.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"spookat/schema"
	"spookat/worker/internal/deliver"
	"spookat/worker/internal/threads"
)

// Sender posts to Slack. One slack.Client per bot token, all sharing one HTTP client.
type Sender struct {
	api     string // base URL, ends with "/": slack-go appends the method name
	http    *http.Client
	threads *threads.Store
	limits  *deliver.Limits
	merge   int

	mu      sync.RWMutex
	clients map[string]*slack.Client
}

// Options of the sender.
type Options struct {
	APIURL   string       // e.g. https://slack.com/api/ (slack.APIURL)
	HTTP     *http.Client // shared, keep-alive
	Threads  *threads.Store
	Pace     time.Duration // posts per channel while rate limited (Slack: ~1/s)
	MergeMax int           // most messages merged into one post
}

// New builds a sender.
func New(o Options) *Sender {
	api := o.APIURL
	if api == "" {
		api = slack.APIURL
	}
	if !strings.HasSuffix(api, "/") {
		api += "/"
	}
	if o.Pace <= 0 {
		o.Pace = time.Second
	}
	return &Sender{
		api:     api,
		http:    o.HTTP,
		threads: o.Threads,
		limits:  deliver.NewLimits(o.Pace, 10*o.Pace),
		merge:   o.MergeMax,
		clients: make(map[string]*slack.Client),
	}
}

func (s *Sender) client(token string) *slack.Client {
	s.mu.RLock()
	c := s.clients[token]
	s.mu.RUnlock()
	if c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.clients[token]; c == nil {
		c = slack.New(token, slack.OptionAPIURL(s.api), slack.OptionHTTPClient(s.http))
		s.clients[token] = c
	}
	return c
}

// MergeMax implements deliver.Merger.
func (s *Sender) MergeMax() int { return s.merge }

// Wait implements deliver.Gate: a channel that answered 429 is held back alone.
func (s *Sender) Wait(site *schema.SiteDelivery, _ *schema.Job) (time.Duration, bool) {
	return s.limits.Wait(site.SlackChannel, time.Now())
}

// Send posts jobs (one, or several of one conversation merged) as one message.
func (s *Sender) Send(ctx context.Context, site *schema.SiteDelivery, jobs []*schema.Job) deliver.Outcome {
	if site.SlackToken == "" || site.SlackChannel == "" {
		return deliver.Permanent(deliver.ErrNotConfigured)
	}
	j := jobs[0]
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
	opts := []slack.MsgOption{slack.MsgOptionText(b.String(), false)}
	if !parent {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	_, ts, err := s.client(site.SlackToken).PostMessageContext(ctx, site.SlackChannel, opts...)
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
	}
	return deliver.Outcome{ExternalID: ts, ThreadID: thread}
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
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		after := max(rl.RetryAfter, time.Second)
		s.limits.Block(site.SlackChannel, time.Now(), after)
		return deliver.RateLimited(after)
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		if se.Err == "ratelimited" {
			s.limits.Block(site.SlackChannel, time.Now(), time.Second)
			return deliver.RateLimited(time.Second)
		}
		if permanent[se.Err] {
			return deliver.Permanent(fmt.Errorf("slack: %s", se.Err))
		}
		return deliver.Fail(fmt.Errorf("slack: %s", se.Err))
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		if sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusRequestTimeout {
			return deliver.Permanent(fmt.Errorf("slack: http %d", sc.Code))
		}
		return deliver.Fail(fmt.Errorf("slack: http %d", sc.Code))
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
	writeLine(b, j)
}

func writeLine(b *strings.Builder, j *schema.Job) {
	b.WriteByte('*')
	b.WriteString(escaper.Replace(who(j)))
	b.WriteString(":* ")
	b.WriteString(escaper.Replace(j.Text))
}
