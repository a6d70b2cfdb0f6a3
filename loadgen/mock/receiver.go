package mock

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is one webhook request the receiver got.
type Event struct {
	Path      string    `json:"path"`
	ID        string    `json:"id"`        // webhook-id
	Timestamp string    `json:"timestamp"` // webhook-timestamp
	Body      []byte    `json:"body"`
	Valid     bool      `json:"valid"`  // signature verified
	Status    int       `json:"status"` // what the receiver answered
	At        time.Time `json:"at"`
}

// ReceiverOptions shape the receiver.
type ReceiverOptions struct {
	Secret    string        // signing secret, "whsec_<base64>" or raw
	Tolerance time.Duration // timestamp tolerance (default 5 min, as the spec suggests)
	Latency   time.Duration
}

// Receiver verifies Standard Webhooks signatures independently of the worker's code (so a bug
// in one is not mirrored in the other). Behaviour by path:
//
//	/status/<code>   always answer <code> (e.g. /status/404)
//	/flaky/<n>/…     answer 500 to the first n attempts of each webhook-id, then 200
//	/limited/<n>/<s>/…  answer 429 with Retry-After: <s> to the first n attempts of each id
//	anything else    200
//
// A missing or bad signature is answered 401.
type Receiver struct {
	opt ReceiverOptions
	key []byte

	mu       sync.Mutex
	events   []Event
	attempts map[string]int
}

// NewReceiver builds the receiver.
func NewReceiver(o ReceiverOptions) *Receiver {
	if o.Tolerance <= 0 {
		o.Tolerance = 5 * time.Minute
	}
	key := []byte(o.Secret)
	if rest, ok := strings.CutPrefix(o.Secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(rest); err == nil {
			key = k
		}
	}
	return &Receiver{opt: o, key: key, attempts: map[string]int{}}
}

// Events returns a copy of every request received.
func (rc *Receiver) Events() []Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Event(nil), rc.events...)
}

// Verify checks a request's signature headers against body, per the spec: any of the
// space-separated "v1,<sig>" entries may match; the timestamp must be within tolerance.
func (rc *Receiver) Verify(id, ts, sigs string, body []byte, now time.Time) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > rc.opt.Tolerance || d < -rc.opt.Tolerance {
		return false
	}
	mac := hmac.New(sha256.New, rc.key)
	io.WriteString(mac, id+"."+ts+".")
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	now := time.Now()
	ev := Event{Path: r.URL.Path, ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"), Body: body, At: now}
	ev.Valid = rc.Verify(ev.ID, ev.Timestamp, r.Header.Get("webhook-signature"), body, now)
	if rc.opt.Latency > 0 {
		time.Sleep(rc.opt.Latency)
	}
	rc.mu.Lock()
	rc.attempts[ev.ID]++
	n := rc.attempts[ev.ID]
	ev.Status = http.StatusOK
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case !ev.Valid:
		ev.Status = http.StatusUnauthorized
	case len(parts) >= 2 && parts[len(parts)-2] == "status":
		if c, err := strconv.Atoi(parts[len(parts)-1]); err == nil && c >= 200 && c < 600 {
			ev.Status = c
		}
	default:
		for i, p := range parts {
			if p == "flaky" && i+1 < len(parts) {
				if k, err := strconv.Atoi(parts[i+1]); err == nil && n <= k {
					ev.Status = http.StatusInternalServerError
				}
			}
			if p == "limited" && i+2 < len(parts) {
				if k, err := strconv.Atoi(parts[i+1]); err == nil && n <= k {
					ev.Status = http.StatusTooManyRequests
					w.Header().Set("Retry-After", parts[i+2])
				}
			}
		}
	}
	rc.events = append(rc.events, ev)
	rc.mu.Unlock()
	w.WriteHeader(ev.Status)
}
