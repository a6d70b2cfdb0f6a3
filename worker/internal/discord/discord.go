// Package discord posts chat jobs through Discord webhooks (?wait=true, so the answer carries
// the message id). Each post starts with a header line naming the conversation, which groups a
// conversation's posts in a plain channel. Discord's rate-limit headers and 429 retry_after
// hold back that webhook alone.
package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"spookat/schema"
	"spookat/worker/internal/deliver"
)

// Sender posts to Discord webhooks.
type Sender struct {
	http   *http.Client
	base   string // replaces https://discord.com/api in webhook URLs (tests, load tests)
	limits *deliver.Limits
}

// New builds a sender; base "" keeps the URLs as configured.
func New(c *http.Client, base string) *Sender {
	return &Sender{http: c, base: strings.TrimSuffix(base, "/"), limits: deliver.NewLimits(time.Second, 5*time.Second)}
}

func (s *Sender) url(u string) string {
	if s.base != "" {
		for _, p := range []string{"https://discord.com/api", "https://discordapp.com/api"} {
			if rest, ok := strings.CutPrefix(u, p); ok {
				u = s.base + rest
				break
			}
		}
	}
	if strings.Contains(u, "?") {
		return u + "&wait=true"
	}
	return u + "?wait=true"
}

// Wait implements deliver.Gate.
func (s *Sender) Wait(site *schema.SiteDelivery, _ *schema.Job) (time.Duration, bool) {
	return s.limits.Wait(site.DiscordWebhook, time.Now())
}

type post struct {
	Content         string          `json:"content"`
	Username        string          `json:"username,omitempty"`
	AllowedMentions allowedMentions `json:"allowed_mentions"`
}

type allowedMentions struct {
	Parse []string `json:"parse"`
}

// Send posts one message.
func (s *Sender) Send(ctx context.Context, site *schema.SiteDelivery, jobs []*schema.Job) deliver.Outcome {
	if site.DiscordWebhook == "" {
		return deliver.Permanent(deliver.ErrNotConfigured)
	}
	j := jobs[0]
	var b strings.Builder
	b.WriteString("**#")
	b.WriteString(strconv.FormatInt(j.ConversationID, 10))
	if j.First {
		b.WriteString(" new conversation")
		if site.Name != "" {
			b.WriteString(" on " + site.Name)
		}
	}
	b.WriteString("** ")
	name := j.Name
	if name == "" {
		name = "Visitor"
		if j.Author == "operator" {
			name = "Operator"
		}
	}
	b.WriteString(name + ": " + j.Text)
	content := b.String()
	if len(content) > 2000 {
		content = content[:1997] + "..."
	}
	// Mentions are never parsed: a visitor must not be able to ping @everyone.
	body, _ := json.Marshal(post{Content: content, Username: "spookat", AllowedMentions: allowedMentions{Parse: []string{}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(site.DiscordWebhook), bytes.NewReader(body))
	if err != nil {
		return deliver.Permanent(fmt.Errorf("discord webhook url: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return deliver.Fail(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	now := time.Now()
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if d, ok := seconds(resp.Header.Get("X-RateLimit-Reset-After")); ok {
			s.limits.Exhausted(site.DiscordWebhook, now, d)
		}
	}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		var m struct {
			ID        string `json:"id"`
			ChannelID string `json:"channel_id"`
		}
		_ = json.Unmarshal(raw, &m)
		return deliver.Outcome{ExternalID: m.ID}
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
		return deliver.RateLimited(d)
	case c >= 500:
		return deliver.Fail(fmt.Errorf("discord: http %d", c))
	default:
		return deliver.Permanent(fmt.Errorf("discord: http %d: %s", c, strings.TrimSpace(string(raw[:min(len(raw), 200)]))))
	}
}

func seconds(v string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}
