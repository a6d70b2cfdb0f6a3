package mock

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DiscordPost is one webhook execution the Discord mock accepted.
type DiscordPost struct {
	Webhook string    `json:"webhook"` // "<id>/<token>"
	ID      string    `json:"id"`
	Content string    `json:"content"`
	Thread  string    `json:"thread,omitempty"`      // forum thread the post went to
	Created string    `json:"thread_name,omitempty"` // set on the post that opened the thread
	At      time.Time `json:"at"`
}

// DiscordOptions shape the Discord mock.
type DiscordOptions struct {
	Latency time.Duration
	// Limit posts per Window per webhook, announced in X-RateLimit-* headers; past it, 429 with
	// retry_after. Limit 0 means 5 per 2 s, Discord's usual webhook bucket.
	Limit  int
	Window time.Duration
}

// Discord is the Discord webhook mock: POST …/webhooks/<id>/<token>[?wait=true].
// Webhook id "404" answers 404 Unknown Webhook. A webhook id starting with "forum" behaves as
// one of a forum channel: a post needs thread_name (which opens a thread) or ?thread_id=, and
// otherwise gets 400 with code 220001, as Discord answers.
type Discord struct {
	opt     DiscordOptions
	seq     atomic.Int64
	limited atomic.Int64

	mu      sync.Mutex
	posts   []DiscordPost
	windows map[string]*window
}

type window struct {
	start time.Time
	used  int
}

// NewDiscord builds the mock.
func NewDiscord(o DiscordOptions) *Discord {
	if o.Limit <= 0 {
		o.Limit = 5
	}
	if o.Window <= 0 {
		o.Window = 2 * time.Second
	}
	return &Discord{opt: o, windows: map[string]*window{}}
}

// Posts returns a copy of the accepted posts.
func (d *Discord) Posts() []DiscordPost {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DiscordPost(nil), d.posts...)
}

// RateLimited is the number of 429s sent.
func (d *Discord) RateLimited() int64 { return d.limited.Load() }

func (d *Discord) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := strings.Index(r.URL.Path, "/webhooks/")
	if r.Method != http.MethodPost || i < 0 {
		writeJSON(w, 404, map[string]any{"message": "404: Not Found", "code": 0})
		return
	}
	hook := strings.Trim(r.URL.Path[i+len("/webhooks/"):], "/")
	var body struct {
		Content    string `json:"content"`
		ThreadName string `json:"thread_name"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Content == "" {
		writeJSON(w, 400, map[string]any{"message": "Cannot send an empty message", "code": 50006})
		return
	}
	threadID := r.URL.Query().Get("thread_id")
	if strings.HasPrefix(hook, "forum") && body.ThreadName == "" && threadID == "" {
		writeJSON(w, 400, map[string]any{"message": "Webhooks posted to forum channels must have a thread_name or thread_id", "code": 220001})
		return
	}
	if !answerAfter(r, d.opt.Latency) {
		return
	}
	if strings.HasPrefix(hook, "404/") {
		writeJSON(w, 404, map[string]any{"message": "Unknown Webhook", "code": 10015})
		return
	}
	now := time.Now()
	d.mu.Lock()
	win := d.windows[hook]
	if win == nil || now.Sub(win.start) >= d.opt.Window {
		win = &window{start: now}
		d.windows[hook] = win
	}
	reset := d.opt.Window - now.Sub(win.start)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.opt.Limit))
	h.Set("X-RateLimit-Bucket", "mock-"+hook)
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(reset.Seconds(), 'f', 3, 64))
	if win.used >= d.opt.Limit {
		d.mu.Unlock()
		d.limited.Add(1)
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("Retry-After", strconv.Itoa(int(reset.Seconds())+1))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.",
			"retry_after": reset.Seconds(), "global": false})
		return
	}
	win.used++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.opt.Limit-win.used))
	id := strconv.FormatInt(1_000_000_000_000+d.seq.Add(1), 10)
	channel := "1"
	if strings.HasPrefix(hook, "forum") {
		if threadID == "" { // thread_name opens a thread: its id is its first post's, as at Discord
			threadID = id
		}
		channel = threadID
	}
	p := DiscordPost{Webhook: hook, ID: id, Content: body.Content, At: now}
	if strings.HasPrefix(hook, "forum") {
		p.Thread, p.Created = threadID, body.ThreadName
	}
	d.posts = append(d.posts, p)
	d.mu.Unlock()
	if r.URL.Query().Get("wait") != "true" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, 200, map[string]any{"id": id, "channel_id": channel, "content": body.Content, "webhook_id": strings.Split(hook, "/")[0]})
}
