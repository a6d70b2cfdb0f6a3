// Package webhook delivers events to a site's endpoint, signed per the Standard Webhooks spec
// (https://www.standardwebhooks.com): headers webhook-id (stable per event, so the receiver
// can drop repeats), webhook-timestamp and webhook-signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>".
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"spookat/schema"
	"spookat/worker/egress"
	"spookat/worker/internal/deliver"
)

// Event is the body posted for each message.
type Event struct {
	// Type is message.created, or conversation.closed / conversation.reopened for a status
	// change (its data is the status message: who, from where, when).
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is the message.
type EventData struct {
	SiteID         int64         `json:"site_id"`
	ConversationID int64         `json:"conversation_id"`
	MessageID      int64         `json:"message_id"`
	Author         schema.Author `json:"author"`
	Name           string        `json:"name,omitempty"`
	Text           string        `json:"text"`
	// Kind is what a system message is: "rating" (the visitor rated the conversation).
	Kind      schema.MessageKind `json:"kind,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	First     bool               `json:"first,omitempty"`
	// Reopened: this visitor's message reopened a closed conversation.
	Reopened bool   `json:"reopened,omitempty"`
	InboxURL string `json:"inbox_url,omitempty"`
	// File is the message's attachment; its url is a signed link that expires (7 days).
	File *schema.File `json:"file,omitempty"`
	// Context is where the visitor started the conversation and with what browser, on the
	// first message's event (absent when the widget did not say).
	Context *schema.VisitorContext `json:"context,omitempty"`
}

// Sender posts events. Its HTTP client carries the 10 s timeout and, unless allowPrivate,
// refuses non-public addresses at connect time (egress.Client).
type Sender struct {
	http         *http.Client
	now          func() time.Time
	limits       *deliver.Limits // receivers that answered 429, by URL
	allowPrivate bool
}

// New builds a sender; allowPrivate (labs, tests) lets http:// URLs and literal private
// addresses pass its URL check (the client decides about connections).
func New(c *http.Client, allowPrivate bool) *Sender {
	return &Sender{http: c, now: time.Now, limits: deliver.NewLimits(time.Second, 0), allowPrivate: allowPrivate}
}

// Wait implements deliver.Gate: a receiver that answered 429 gets nothing before its
// Retry-After; other receivers keep flowing.
func (s *Sender) Wait(site *schema.SiteDelivery, _ *schema.Job) (time.Duration, bool) {
	return s.limits.Wait(site.WebhookURL, s.now())
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), 1 s when absent, at most 1 h.
func retryAfter(v string, now time.Time) time.Duration {
	d := time.Second
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, time.Second), time.Hour)
}

// SecretKey decodes a signing secret: "whsec_<base64>" as the spec writes them, else the raw bytes.
func SecretKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return k
		}
	}
	return []byte(secret)
}

// Sign returns the webhook-signature header value.
func Sign(key []byte, id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Send posts one event.
func (s *Sender) Send(ctx context.Context, deadline time.Time, site *schema.SiteDelivery, jobs []*schema.Job) deliver.Outcome {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if site.WebhookURL == "" {
		return deliver.Permanent(deliver.ErrNotConfigured)
	}
	// Saved before the edge checked URLs, or by an edge with other settings: checked again.
	// Errors never quote the URL, here or below: they go to RESULTS, DEAD, the inbox and logs.
	if err := egress.CheckWebhookURL(site.WebhookURL, s.allowPrivate); err != nil {
		return deliver.Permanent(errors.New("webhook: refused: the URL " + err.Error()))
	}
	j := jobs[0]
	typ := "message.created"
	if j.Kind.Status() != "" {
		typ = "conversation." + string(j.Kind)
	}
	var body []byte
	var err error
	if e := j.Erasure; e != nil {
		// Not a message: the person the site erased, for the receiver to erase too.
		body, err = json.Marshal(struct {
			Type      string          `json:"type"`
			Timestamp time.Time       `json:"timestamp"`
			Data      *schema.Erasure `json:"data"`
		}{"person.erased", e.At, e})
	} else {
		body, err = json.Marshal(Event{Type: typ, Timestamp: j.CreatedAt, Data: EventData{
			SiteID: j.SiteID, ConversationID: j.ConversationID, MessageID: j.MessageID, Author: j.Author,
			Name: j.Name, Text: j.Text, Kind: j.Kind, CreatedAt: j.CreatedAt, First: j.First, Reopened: j.Reopened,
			InboxURL: j.InboxURL, File: j.File, Context: j.Context}})
	}
	if err != nil {
		return deliver.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, site.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return deliver.Permanent(errors.New("webhook: invalid URL"))
	}
	ts := s.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "spookat-webhooks/1")
	req.Header.Set("webhook-id", j.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	if site.WebhookSecret != "" {
		req.Header.Set("webhook-signature", Sign(SecretKey(site.WebhookSecret), j.ID, ts, body))
	}
	resp, err := s.http.Do(req)
	if err != nil {
		out := deliver.Fail(errors.New("webhook: " + egress.Reason(err))) // network error or the 10 s timeout
		var refused *egress.RefusedError
		out.Permanent = errors.As(err, &refused) // the name leads into a network it must not reach
		return out
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return deliver.Outcome{ExternalID: j.ID}
	case c == http.StatusTooManyRequests:
		// Not an attempt against the job: the receiver said when to come back.
		now := s.now()
		after := retryAfter(resp.Header.Get("Retry-After"), now)
		s.limits.Exhausted(site.WebhookURL, now, after)
		return deliver.RateLimited(after)
	case c >= 300 && c < 400:
		return deliver.Permanent(fmt.Errorf("webhook: http %d: %w", c, egress.ErrRedirect))
	case c == http.StatusRequestTimeout || c >= 500:
		return deliver.Fail(fmt.Errorf("webhook: http %d", c))
	default:
		return deliver.Permanent(fmt.Errorf("webhook: http %d", c))
	}
}
