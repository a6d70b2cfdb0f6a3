// Package mock holds stand-ins for the outside services the worker talks to: the Slack Web API
// (chat.postMessage, reactions.add, reactions.remove), Discord webhooks and a webhook receiver that verifies Standard Webhooks
// signatures. Each is an http.Handler that records what it received, so tests run them under
// httptest and load tests under `loadgen mock`. Standard library only.
package mock

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
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

// Reaction is one reactions.add (On) or reactions.remove the Slack mock accepted.
type Reaction struct {
	Channel string    `json:"channel"`
	TS      string    `json:"timestamp"` // the post reacted to
	Name    string    `json:"name"`      // emoji name without colons
	On      bool      `json:"on"`        // added (true) or removed
	At      time.Time `json:"at"`
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

	mu        sync.Mutex
	files     map[string]slackFile
	posts     []Post
	reactions []Reaction
	reacted   map[string]bool // channel + " " + ts + " " + name → the bot's reaction is there
	buckets   map[string]*bucket
	fails     map[string]int // channel → answers of 500 still to give (FailNext)
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewSlack builds the mock. Mount it anywhere: it answers any path ending in /chat.postMessage,
// /reactions.add, /reactions.remove or /auth.test.
func NewSlack(o SlackOptions) *Slack {
	if o.Rate <= 0 {
		o.Rate = 1
	}
	if o.Burst <= 0 {
		o.Burst = 3
	}
	return &Slack{opt: o, base: time.Now().Unix(), buckets: map[string]*bucket{}, fails: map[string]int{}, reacted: map[string]bool{}}
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

// Reactions returns a copy of every accepted reactions.add and reactions.remove, in order.
func (s *Slack) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// Reacted reports whether the bot's reaction name is on the post ts in channel now.
func (s *Slack) Reacted(channel, ts, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reacted[channel+" "+ts+" "+name]
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
	s.reactions, s.reacted = nil, map[string]bool{}
	s.mu.Unlock()
	s.limited.Store(0)
}

type slackReq struct {
	Channel  string `json:"channel"`
	Text     string `json:"text"`
	ThreadTS string `json:"thread_ts"`
}

// AddFile makes a file downloadable at the mock's /files-pri/<id>/<name> (Slack's
// url_private_download), for requests with the bot token token; the URL path is returned.
func (s *Slack) AddFile(id, name, token string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string]slackFile{}
	}
	path := "/files-pri/T0MOCK-" + id + "/" + name
	s.files[path] = slackFile{token: token, data: data}
	return path
}

type slackFile struct {
	token string
	data  []byte
}

// serveFile answers a download as Slack's file host does: the bytes with the right bot token,
// else a redirect to the login page (what Slack does without one) or 404.
func (s *Slack) serveFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.URL.Path]
	s.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case r.Header.Get("Authorization") != "Bearer "+f.token:
		http.Redirect(w, r, "/?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
	default:
		_, _ = w.Write(f.data)
	}
}

func (s *Slack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat.postMessage"):
	case strings.HasSuffix(r.URL.Path, "/reactions.add"):
		s.serveReaction(w, r, true)
		return
	case strings.HasSuffix(r.URL.Path, "/reactions.remove"):
		s.serveReaction(w, r, false)
		return
	case strings.HasSuffix(r.URL.Path, "/auth.test"):
		writeJSON(w, 200, map[string]any{"ok": true, "team": "mock", "user": "spookat"})
		return
	case strings.HasPrefix(r.URL.Path, "/files-pri/"):
		s.serveFile(w, r)
		return
	default:
		writeJSON(w, 404, map[string]any{"ok": false, "error": "unknown_method"})
		return
	}
	received := time.Now()
	var req slackReq
	token, ok := readArgs(w, r, &req, func(f url.Values) {
		req.Channel, req.Text, req.ThreadTS = f.Get("channel"), f.Get("text"), f.Get("thread_ts")
	})
	if !ok {
		return
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

type reactionReq struct {
	Channel   string `json:"channel"`
	Timestamp string `json:"timestamp"`
	Name      string `json:"name"`
}

// serveReaction answers reactions.add (on) or reactions.remove as Slack documents them:
// already_reacted for a reaction the bot has there, no_reaction for one it has not,
// message_not_found for a ts the mock never posted, no_item_specified and invalid_name for
// missing fields.
func (s *Slack) serveReaction(w http.ResponseWriter, r *http.Request, on bool) {
	var req reactionReq
	token, ok := readArgs(w, r, &req, func(f url.Values) {
		req.Channel, req.Timestamp, req.Name = f.Get("channel"), f.Get("timestamp"), f.Get("name")
	})
	if !ok {
		return
	}
	if !answerAfter(r, s.opt.Latency) {
		return
	}
	code := s.fail(req.Channel, token)
	switch {
	case token == "":
		code = "not_authed"
	case code != "":
	case req.Channel == "" || req.Timestamp == "":
		code = "no_item_specified"
	case req.Name == "" || strings.ContainsAny(req.Name, ": "):
		code = "invalid_name"
	}
	if code != "" {
		writeJSON(w, 200, map[string]any{"ok": false, "error": code})
		return
	}
	key := req.Channel + " " + req.Timestamp + " " + req.Name
	s.mu.Lock()
	found := false
	for i := range s.posts {
		if s.posts[i].Channel == req.Channel && s.posts[i].TS == req.Timestamp {
			found = true
			break
		}
	}
	switch {
	case !found:
		code = "message_not_found"
	case on && s.reacted[key]:
		code = "already_reacted"
	case !on && !s.reacted[key]:
		code = "no_reaction"
	default:
		s.reacted[key] = on
		s.reactions = append(s.reactions, Reaction{Channel: req.Channel, TS: req.Timestamp, Name: req.Name, On: on, At: time.Now()})
	}
	s.mu.Unlock()
	if code != "" {
		writeJSON(w, 200, map[string]any{"ok": false, "error": code})
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true})
}

// readArgs reads a Web API call's arguments as Slack takes them: a JSON body into dst, or a
// form (form reads it), and the token from the Authorization header or the form's "token".
// A body it cannot read is answered here (invalid_json, invalid_form_data) and ok is false.
func readArgs(w http.ResponseWriter, r *http.Request, dst any, form func(url.Values)) (token string, ok bool) {
	token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(r.Body).Decode(dst); err != nil {
			writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_json"})
			return "", false
		}
		return token, true
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 200, map[string]any{"ok": false, "error": "invalid_form_data"})
		return "", false
	}
	form(r.PostForm)
	if t := r.PostForm.Get("token"); t != "" {
		token = t
	}
	return token, true
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
