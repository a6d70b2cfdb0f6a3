package mock

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Paddle sends Paddle Billing notifications as Paddle does: a JSON event (event_id,
// event_type, occurred_at, notification_id, data) with a Paddle-Signature header
// "ts=<unix>;h1=<HMAC-SHA256 of ts:body under the destination's secret key>", one h1 per
// secret while a key is being rotated. Tests build subscription events and send them in any
// order, twice, late, or with a signature of their choosing.
type Paddle struct {
	Secrets []string // signing keys, one h1 each
	Clock   func() time.Time
	n       atomic.Int64
}

// PaddleSubscription is the part of a subscription an event carries that spookat reads.
type PaddleSubscription struct {
	ID         string
	Status     string // active, trialing, past_due, paused, canceled
	CustomerID string
	SiteKeys   []string // custom_data.site_keys
	Prices     []string // items[].price.id
}

// PaddleEvent is one notification, its body as sent.
type PaddleEvent struct {
	ID   string
	Type string
	At   time.Time
	Body []byte
}

// Event builds a subscription event (subscription.created, .updated, .past_due, .paused,
// .resumed, .canceled) that occurred at at.
func (p *Paddle) Event(eventType string, at time.Time, s PaddleSubscription) PaddleEvent {
	n := p.n.Add(1)
	id := fmt.Sprintf("evt_01mock%020d", n)
	items := []map[string]any{}
	for _, price := range s.Prices {
		items = append(items, map[string]any{"status": "active", "quantity": 1, "price": map[string]any{"id": price, "product_id": "pro_01mock"}})
	}
	body, _ := json.Marshal(map[string]any{
		"event_id": id, "event_type": eventType, "occurred_at": at.UTC().Format(time.RFC3339Nano),
		"notification_id": fmt.Sprintf("ntf_01mock%020d", n),
		"data": map[string]any{
			"id": s.ID, "status": s.Status, "customer_id": s.CustomerID, "currency_code": "EUR", "collection_mode": "automatic",
			"custom_data": map[string]any{"site_keys": s.SiteKeys}, "items": items,
			"created_at": at.UTC().Format(time.RFC3339Nano), "updated_at": at.UTC().Format(time.RFC3339Nano),
		},
	})
	return PaddleEvent{ID: id, Type: eventType, At: at, Body: body}
}

func (p *Paddle) now() time.Time {
	if p.Clock != nil {
		return p.Clock()
	}
	return time.Now()
}

// Sign is the Paddle-Signature header of body at time ts, under every secret.
func Sign(body []byte, ts time.Time, secrets ...string) string {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	h := "ts=" + stamp
	for _, s := range secrets {
		m := hmac.New(sha256.New, []byte(s))
		m.Write([]byte(stamp + ":"))
		m.Write(body)
		h += ";h1=" + hex.EncodeToString(m.Sum(nil))
	}
	return h
}

// Request is the POST of an event to url, signed now with the Paddle's secrets.
func (p *Paddle) Request(url string, ev PaddleEvent) *http.Request {
	return p.RequestSigned(url, ev.Body, Sign(ev.Body, p.now(), p.Secrets...))
}

// RequestSigned is a POST of body with the signature header given (tampered, stale…).
func (p *Paddle) RequestSigned(url string, body []byte, signature string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Paddle")
	if signature != "" {
		req.Header.Set("Paddle-Signature", signature)
	}
	return req
}
