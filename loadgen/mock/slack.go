// Package mock holds stand-ins for the outside services the worker talks to: the Slack Web API
// (chat.postMessage), Discord webhooks and a webhook receiver that verifies Standard Webhooks
// signatures. Each is an http.Handler that records what it received, so tests run them under
// httptest and load tests under `loadgen mock`. Standard library only.
package mock

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Post is one chat.postMessage the Slack mock accepted.
type Post struct {
	Channel  string    `json:"channel"`
	ThreadTS string    `json:"thread_ts,omitempty"` // "" for a parent post
	TS       string    `json:"ts"`
	Text     string    `json:"text"`
	Token    string    `json:"-"`
	At       time.Time `json:"at"`       // accepted (after the latency)
	Received time.Time `json:"received"` // the request arrived
}

// SlackOptions shape the Slack mock.
type SlackOptions struct {
	Latency time.Duration // answer after this long (default 0; `loadgen mock` uses 50 ms)
	// Realistic enforces Slack's ~1 post/s per channel: Burst posts at once, refilled at Rate
	// per second, and 429 + Retry-After past it.
	Realistic bool
	Rate      float64 // posts per second per channel (default 1)
	Burst     int     // default 3
	// Fail, if set, returns a Slack error code ("channel_not_found", …) to answer a post with.
	// Without it, channels starting with "CNOTFOUND" answer channel_not_found and tokens
	// starting with "xoxb-revoked" answer invalid_auth.
	Fail func(channel, token string) string
}

// Slack is the Slack Web API mock.
type Slack struct {
	opt     SlackOptions
	seq     atomic.Int64
	base    int64
	limited atomic.Int64

	mu      sync.Mutex
	posts   []Post
	buckets map[string]*bucket
	fails   map[string]int // channel → answers of 500 still to give (FailNext)
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewSlack builds the mock. Mount it anywhere: it answers any path ending in /chat.postMessage.
func NewSlack(o SlackOptions) *Slack {
	if o.Rate <= 0 {
		o.Rate = 1
	}
	if o.Burst <= 0 {
		o.Burst = 3
	}
	return &Slack{opt: o, base: time.Now().Unix(), buckets: map[string]*bucket{}, fails: map[string]int{}}
}

// FailNext makes the next n posts to channel answer HTTP 500.
func (s *Slack) FailNext(channel string, n int) {
	s.mu.Lock()
	s.fails[channel] += n
	s.mu.Unlock()
}

// Posts returns a copy of every accepted post, in acceptance order.
func (s *Slack) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// Count is the number of accepted posts.
func (s *Slack) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.posts)
}

// RateLimited is the number of 429s sent.
func (s *Slack) RateLimited() int64 { return s.limited.Load() }

// Reset forgets posts and rate-limit state.
func (s *Slack) Reset() {
	s.mu.Lock()
	s.posts, s.buckets, s.fails = nil, map[string]*bucket{}, map[string]int{}
	s.mu.Unlock()
	s.limited.Store(0)
}

type slackReq struct {
	Channel  string `json:"channel"`
	Text     string `json:"text"`
	ThreadTS string `json:"thread_ts"`
}

func (s *Slack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
		if strings.HasSuffix(r.URL.Path, "/auth.test") {
			writeJSON(w, 200, map[string]any{"ok": true, "team": "mock", "user": "spookat"})
			return
		}
		writeJSON(w, 404, map[string]any{"ok": false, "error": "unknown_method"})
		return
	}
	received := time.Now()
	var req slackReq
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_json"})
			return
		}
	} else {
		if err := r.ParseForm(); err != nil {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_form_data"})
			return
		}
		req.Channel, req.Text, req.ThreadTS = r.PostForm.Get("channel"), r.PostForm.Get("text"), r.PostForm.Get("thread_ts")
		if t := r.PostForm.Get("token"); t != "" {
			token = t
		}
	}
	if !answerAfter(r, s.opt.Latency) {
		return
	}
	if token == "" {
		writeJSON(w, 200, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	if code := s.fail(req.Channel, token); code != "" {
		writeJSON(w, 200, map[string]any{"ok": false, "error": code})
		return
	}
	if req.Text == "" {
		writeJSON(w, 200, map[string]any{"ok": false, "error": "no_text"})
		return
	}
	now := time.Now()
	s.mu.Lock()
	if s.fails[req.Channel] > 0 {
		s.fails[req.Channel]--
		s.mu.Unlock()
		http.Error(w, "<html>internal error</html>", http.StatusInternalServerError)
		return
	}
	if s.opt.Realistic {
		if wait := s.take(req.Channel, now); wait > 0 {
			s.mu.Unlock()
			s.limited.Add(1)
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
			return
		}
	}
	n := s.seq.Add(1)
	ts := strconv.FormatInt(s.base+n/1_000_000, 10) + "." + pad6(n%1_000_000)
	s.posts = append(s.posts, Post{Channel: req.Channel, ThreadTS: req.ThreadTS, TS: ts, Text: req.Text, Token: token, At: now, Received: received})
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"ok": true, "channel": req.Channel, "ts": ts,
		"message": map[string]any{"type": "message", "text": req.Text, "ts": ts, "thread_ts": req.ThreadTS}})
}

func (s *Slack) fail(channel, token string) string {
	if s.opt.Fail != nil {
		return s.opt.Fail(channel, token)
	}
	switch {
	case strings.HasPrefix(channel, "CNOTFOUND"):
		return "channel_not_found"
	case strings.HasPrefix(token, "xoxb-revoked"):
		return "invalid_auth"
	}
	return ""
}

// take spends a token of channel's bucket, or says how long until one is there. Lock held.
func (s *Slack) take(channel string, now time.Time) time.Duration {
	b := s.buckets[channel]
	if b == nil {
		b = &bucket{tokens: float64(s.opt.Burst), at: now}
		s.buckets[channel] = b
	}
	b.tokens = math.Min(float64(s.opt.Burst), b.tokens+now.Sub(b.at).Seconds()*s.opt.Rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / s.opt.Rate * float64(time.Second))
}

func pad6(n int64) string {
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", 6-len(s)) + s
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
