// Package discord posts chat jobs through Discord webhooks (?wait=true, so the answer carries
// the message id). In a plain channel each post starts with a header line naming the
// conversation, which groups its posts. In a forum channel each conversation is a thread: the
// first post opens it (thread_name), later ones go to it (thread_id), and its id is kept in
// the THREADS bucket like a Slack thread. A webhook is known to be a forum's the first time
// Discord refuses a post without a thread (code 220001); nothing needs configuring.
// Discord's rate-limit headers and 429 retry_after hold back that webhook alone.
package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"spookat/schema"
	"spookat/worker/egress"
	"spookat/worker/internal/deliver"
	"spookat/worker/internal/threads"
)

// codeForumNeedsThread is Discord's answer to a post without thread_name or thread_id into a
// forum channel.
const codeForumNeedsThread = 220001

// Sender posts to Discord webhooks.
type Sender struct {
	http         *http.Client
	base         string // replaces https://discord.com/api in webhook URLs (tests, load tests)
	limits       *deliver.Limits
	threads      *threads.Store
	forums       sync.Map // webhook URL → true: it posts into a forum channel
	allowPrivate bool     // any http(s) URL, not only discord.com's (labs, tests)
}

// New builds a sender; base "" keeps the URLs as configured. The webhook URL is a secret (its
// path holds the token): no error of this package quotes it or what Discord answered, only a
// status, Discord's error code and a short reason.
func New(c *http.Client, base string, th *threads.Store, allowPrivate bool) *Sender {
	return &Sender{http: c, base: strings.TrimSuffix(base, "/"), limits: deliver.NewLimits(time.Second, 5*time.Second),
		threads: th, allowPrivate: allowPrivate}
}

func (s *Sender) url(u, threadID string) string {
	if s.base != "" {
		for _, p := range []string{"https://discord.com/api", "https://discordapp.com/api"} {
			if rest, ok := strings.CutPrefix(u, p); ok {
				u = s.base + rest
				break
			}
		}
	}
	q := "wait=true"
	if threadID != "" {
		q += "&thread_id=" + url.QueryEscape(threadID)
	}
	if strings.Contains(u, "?") {
		return u + "&" + q
	}
	return u + "?" + q
}

// Wait implements deliver.Gate.
func (s *Sender) Wait(site *schema.SiteDelivery, _ *schema.Job) (time.Duration, bool) {
	return s.limits.Wait(site.DiscordWebhook, time.Now())
}

type post struct {
	Content         string          `json:"content"`
	Username        string          `json:"username,omitempty"`
	ThreadName      string          `json:"thread_name,omitempty"`
	AllowedMentions allowedMentions `json:"allowed_mentions"`
}

type allowedMentions struct {
	Parse []string `json:"parse"`
}

// Send posts one message.
func (s *Sender) Send(ctx context.Context, deadline time.Time, site *schema.SiteDelivery, jobs []*schema.Job) deliver.Outcome {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if site.DiscordWebhook == "" {
		return deliver.Permanent(deliver.ErrNotConfigured)
	}
	// Saved before the edge checked URLs, or by an edge with other settings: checked again.
	if err := egress.CheckDiscordURL(site.DiscordWebhook, s.allowPrivate); err != nil {
		return deliver.Permanent(errors.New("discord: refused: the webhook URL " + err.Error()))
	}
	j := jobs[0]
	if _, forum := s.forums.Load(site.DiscordWebhook); forum {
		return s.sendToThread(ctx, site, j)
	}
	out, code := s.post(ctx, site, post{Content: header(site, j) + line(j)}, "")
	if code == codeForumNeedsThread {
		s.forums.Store(site.DiscordWebhook, true)
		return s.sendToThread(ctx, site, j)
	}
	return out
}

// sendToThread posts into the conversation's forum thread, opening it with the first post.
func (s *Sender) sendToThread(ctx context.Context, site *schema.SiteDelivery, j *schema.Job) deliver.Outcome {
	key := schema.ThreadKey(schema.TargetDiscord, j.SiteID, j.ConversationID)
	thread, err := s.threads.Get(ctx, key)
	if err != nil {
		return deliver.Fail(fmt.Errorf("read thread: %w", err))
	}
	if thread != "" {
		if j.First {
			// The first message opened the thread: it was posted and its ack lost (and
			// maybe the thread's site with it).
			if err := s.threads.Put(ctx, schema.DiscordThreadSiteKey(thread), strconv.FormatInt(j.SiteID, 10)); err != nil {
				return deliver.Fail(fmt.Errorf("store thread: %w", err))
			}
			return deliver.Outcome{ExternalID: thread, ThreadID: thread}
		}
		out, _ := s.post(ctx, site, post{Content: line(j)}, thread)
		out.ThreadID = thread
		return out
	}
	subject := j.Text
	if subject == "" && j.File != nil {
		subject = j.File.Name
	}
	name := "#" + strconv.FormatInt(j.ConversationID, 10) + " " + subject
	if len(name) > 100 { // Discord's limit for a thread name
		name = name[:97] + "..."
	}
	out, _ := s.post(ctx, site, post{Content: header(site, j) + line(j), ThreadName: name}, "")
	if out.Err != nil || out.ThreadID == "" {
		return out
	}
	if err := s.threads.Put(ctx, key, out.ThreadID); err != nil {
		// The thread is open; without its id the next message would open a second one.
		return deliver.Fail(fmt.Errorf("store thread: %w", err))
	}
	// And the other way: a reply written in the thread is the site's (package gateway).
	if err := s.threads.Put(ctx, schema.DiscordThreadSiteKey(out.ThreadID), strconv.FormatInt(j.SiteID, 10)); err != nil {
		return deliver.Fail(fmt.Errorf("store thread: %w", err))
	}
	return out
}

// header names the conversation (and, on its first message, the site and where the visitor
// started: the page's address in <> so that Discord shows no preview of it).
func header(site *schema.SiteDelivery, j *schema.Job) string {
	h := "**#" + strconv.FormatInt(j.ConversationID, 10)
	if j.First {
		h += " new conversation"
		if site.Name != "" {
			h += " on " + site.Name
		}
	}
	h += "** "
	if c := j.Context; j.First && c != nil {
		page := "<" + linkURL.Replace(c.URL) + ">"
		if c.Title != "" {
			page = c.Title + " " + page
		}
		h += "\n🌐 " + strings.Join(append([]string{page}, c.Facts()...), " · ") + "\n"
	}
	return h
}

func line(j *schema.Job) string {
	if j.MaybeRepeat {
		return statusOrText(j) + " *(" + schema.RepeatMark + ")*"
	}
	return statusOrText(j)
}

func statusOrText(j *schema.Job) string {
	switch j.Kind {
	case schema.KindClosed:
		return "✅ *" + j.Text + "*"
	case schema.KindReopened:
		return "↩️ *" + j.Text + "*"
	case schema.KindSnoozed:
		return "💤 *" + j.Text + "*"
	}
	reopened := ""
	if j.Reopened {
		reopened = "↩️ *Reopened by the visitor's message*\n"
	}
	name := j.Name
	if name == "" {
		name = "Visitor"
		if j.Author == schema.AuthorOperator {
			name = "Operator"
		}
	}
	l := reopened + name + ": " + j.Text
	if f := j.File; f != nil {
		// A plain link: Discord shows an image's preview under it.
		l += "\n📎 " + f.Name + " (" + f.SizeText() + "): " + f.URL
	}
	return l
}

// post sends one webhook execution. It returns the outcome and, for a refused post, Discord's
// error code (0 when there is none).
func (s *Sender) post(ctx context.Context, site *schema.SiteDelivery, p post, threadID string) (deliver.Outcome, int) {
	if len(p.Content) > 2000 {
		p.Content = p.Content[:1997] + "..."
	}
	p.Username = "spookat"
	// Mentions are never parsed: a visitor must not be able to ping @everyone.
	p.AllowedMentions = allowedMentions{Parse: []string{}}
	body, _ := json.Marshal(p)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(site.DiscordWebhook, threadID), bytes.NewReader(body))
	if err != nil {
		return deliver.Permanent(errors.New("discord: invalid webhook URL")), 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		out := deliver.Fail(errors.New("discord: " + egress.Reason(err)))
		var refused *egress.RefusedError
		out.Permanent = errors.As(err, &refused)
		return out, 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	now := time.Now()
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if d, ok := seconds(resp.Header.Get("X-RateLimit-Reset-After")); ok {
			// The header is rounded to the millisecond (0.2994 s left reads 0.299):
			// waiting what it says to the digit can send the next post a fraction of a
			// millisecond before the bucket refills, and earn a 429.
			s.limits.Exhausted(site.DiscordWebhook, now, d+time.Millisecond)
		}
	}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		var m struct {
			ID        string `json:"id"`
			ChannelID string `json:"channel_id"`
		}
		_ = json.Unmarshal(raw, &m)
		out := deliver.Outcome{ExternalID: m.ID}
		if p.ThreadName != "" || threadID != "" {
			out.ThreadID = m.ChannelID // in a forum, a thread is a channel
		}
		return out, 0
	case c == http.StatusTooManyRequests:
		var rl struct {
			RetryAfter float64 `json:"retry_after"`
		}
		_ = json.Unmarshal(raw, &rl)
		d := time.Duration(rl.RetryAfter * float64(time.Second))
		if h, ok := seconds(resp.Header.Get("Retry-After")); ok && h > d {
			d = h
		}
		d = max(d, 100*time.Millisecond)
		s.limits.Block(site.DiscordWebhook, now, d)
		return deliver.RateLimited(d), 0
	case c >= 500:
		return deliver.Fail(fmt.Errorf("discord: http %d", c)), 0
	case c >= 300 && c < 400:
		return deliver.Permanent(fmt.Errorf("discord: http %d: %w", c, egress.ErrRedirect)), 0
	default:
		// Only Discord's numeric code: its message text, or a stand-in's body, could echo
		// the request.
		var e struct {
			Code int `json:"code"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Code != 0 {
			return deliver.Permanent(fmt.Errorf("discord: http %d (code %d)", c, e.Code)), e.Code
		}
		return deliver.Permanent(fmt.Errorf("discord: http %d", c)), 0
	}
}

func seconds(v string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// linkURL escapes a page's address for Discord's <url> (a link without an embed): a '>' or a
// space would end it early.
var linkURL = strings.NewReplacer(">", "%3E", " ", "%20")
