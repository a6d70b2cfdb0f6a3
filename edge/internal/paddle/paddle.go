// Package paddle takes Paddle Billing's notifications: POST /v1/integrations/paddle/events,
// mounted only when the edge runs with -plans. Each is checked as Paddle documents: the
// Paddle-Signature header (ts=<unix>;h1=<hex>[;h1=…]) must hold an HMAC-SHA256, under one of
// the destination's secret keys (two while one is rotated), of "<ts>:<raw body>", with ts
// within the tolerance of now (past or future); anything else is 401 and changes nothing.
//
// subscription.* events move the plan of the sites the subscription names in its custom data
// ({"site_key":"st_…"} or {"site_keys":[…]}; the plan's sites limit says how many of them it
// covers): the plan its items' prices buy, with the subscription's status (active, trialing,
// past_due — kept for the grace, then the default plan —, paused, canceled). An event id seen
// before changes nothing (Paddle redelivers); an event older than the last one applied to its
// subscription changes nothing (Paddle does not promise order). Recorded by the writer with
// an audit entry per site, in one commit.
package paddle

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/plans"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// MaxBody bounds a notification (Paddle's are a few KiB).
const MaxBody = 256 << 10

// Handler serves the route.
type Handler struct {
	Store *store.Store
	Sites *sites.Registry
	Book  *plans.Book
	Log   *slog.Logger
	Clock func() time.Time
}

// Register mounts the route.
func (h *Handler) Register(app *fiber.App) {
	app.Post("/v1/integrations/paddle/events", h.serve)
}

// event is a notification (the fields used).
type event struct {
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	OccurredAt time.Time `json:"occurred_at"`
	Data       struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		CustomerID string `json:"customer_id"`
		CustomData struct {
			SiteKey  string   `json:"site_key"`
			SiteKeys []string `json:"site_keys"`
		} `json:"custom_data"`
		Items []struct {
			Price struct {
				ID string `json:"id"`
			} `json:"price"`
		} `json:"items"`
	} `json:"data"`
}

func fail(c *fiber.Ctx, status int, code, msg string) error {
	return c.Status(status).JSON(schema.HTTPError{Code: code, Message: msg})
}

func (h *Handler) now() time.Time {
	if h.Clock != nil {
		return h.Clock()
	}
	return time.Now()
}

func (h *Handler) serve(c *fiber.Ctx) error {
	body := c.Body()
	if len(body) > MaxBody {
		return fail(c, fiber.StatusRequestEntityTooLarge, schema.CodeTooLarge, "A Paddle notification is a few KiB; this one is over 256 KiB.")
	}
	if err := Verify(c.Get("Paddle-Signature"), body, h.Book.Config.PaddleSecrets, h.Book.Config.Tolerance(), h.now()); err != nil {
		return fail(c, fiber.StatusUnauthorized, "unauthorized", "The notification is not signed with this destination's secret key: "+err.Error()+".")
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || ev.EventID == "" || ev.EventType == "" || ev.OccurredAt.IsZero() {
		return fail(c, fiber.StatusBadRequest, schema.CodeInvalid, "Not a Paddle notification: event_id, event_type and occurred_at are required.")
	}
	ctx, cancel := context.WithTimeout(c.Context(), 4*time.Second) // Paddle waits 5 s for the answer
	defer cancel()
	out, err := h.apply(ctx, &ev)
	if err != nil {
		h.Log.Error("paddle notification not recorded; Paddle sends it again", "event", ev.EventID, "err", err)
		return fail(c, fiber.StatusServiceUnavailable, schema.CodeUnavailable, "Not recorded now; send it again.")
	}
	return c.JSON(out)
}

// Outcome is the answer to a notification.
type Outcome struct {
	Event   string   `json:"event"`
	Applied bool     `json:"applied"`
	Why     string   `json:"why,omitempty"` // why not: duplicate, stale, not a subscription event…
	Plan    string   `json:"plan,omitempty"`
	Sites   []string `json:"sites,omitempty"`   // site keys moved to Plan
	Default []string `json:"default,omitempty"` // site keys beyond the plan's sites, or unknown
}

// apply records an event in one commit of the writer.
func (h *Handler) apply(ctx context.Context, ev *event) (*Outcome, error) {
	out := &Outcome{Event: ev.EventID}
	cfg := h.Book.Config
	var changed []store.SitePlan
	err := h.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		out.Applied, out.Why, out.Sites, out.Default, changed = false, "", nil, nil, nil
		seen, err := tx.PaddleEventSeen(ev.EventID)
		if err != nil || seen {
			out.Why = "duplicate"
			return err
		}
		if !strings.HasPrefix(ev.EventType, "subscription.") || ev.Data.ID == "" {
			out.Why = "not a subscription event"
			return nil
		}
		last, oldSites, found, err := tx.PaddleSubscription(ev.Data.ID)
		if err != nil {
			return err
		}
		at := ev.OccurredAt.UnixMilli()
		if found && at < last {
			out.Why = "stale: a later event of the subscription is applied"
			return nil
		}
		status := statusOf(ev)
		plan := cfg.Plans[cfg.Default]
		for _, it := range ev.Data.Items {
			if p := cfg.ByPrice(it.Price.ID); p != nil {
				plan = p
				break
			}
		}
		keys := ev.Data.CustomData.SiteKeys
		if ev.Data.CustomData.SiteKey != "" {
			keys = append([]string{ev.Data.CustomData.SiteKey}, keys...)
		}
		if err := tx.SetPaddleSubscription(ev.Data.ID, at, status, plan.Name, keys); err != nil {
			return err
		}
		out.Applied, out.Plan = true, plan.Name
		covered := 0
		for _, key := range keys {
			s := h.Sites.ByKey(key)
			if s == nil {
				out.Default = append(out.Default, key)
				continue
			}
			p := store.SitePlan{SiteID: s.ID, Plan: plan.Name, Status: status, SubscriptionID: ev.Data.ID, PastDueSince: at}
			if plan.Sites > 0 && covered >= plan.Sites {
				p.Plan, p.Status = cfg.Default, "active" // beyond the plan's sites
				out.Default = append(out.Default, key)
			} else {
				covered++
				out.Sites = append(out.Sites, key)
			}
			if err := tx.SetSitePlan(&p); err != nil {
				return err
			}
			// A plan keeps conversations so long at most: the site's retention follows.
			if _, err := tx.CapRetention(s.ID, cfg.Get(p.Plan).RetentionDaysMax); err != nil {
				return err
			}
			changed = append(changed, p)
			now := p.Plan // the plan the site is on now: the subscription's unless it lapsed
			if p.Status == "paused" || p.Status == "canceled" {
				now = cfg.Default
			}
			if err := tx.Audit(store.AuditEntry{SiteID: s.ID, Actor: "paddle", Action: store.AuditPlanChanged,
				Detail: map[string]any{"plan": now, "subscription_plan": p.Plan, "status": p.Status, "subscription": ev.Data.ID, "event": ev.EventType}}); err != nil {
				return err
			}
		}
		// Sites the subscription named before and names no more fall back to the default.
		for _, key := range oldSites {
			if s := h.Sites.ByKey(key); s != nil && !slices.Contains(keys, key) {
				p := store.SitePlan{SiteID: s.ID, Plan: cfg.Default, Status: "canceled", SubscriptionID: ev.Data.ID}
				if err := tx.SetSitePlan(&p); err != nil {
					return err
				}
				if _, err := tx.CapRetention(s.ID, cfg.Get(p.Plan).RetentionDaysMax); err != nil {
					return err
				}
				changed = append(changed, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range changed {
		h.Book.Set(p)
	}
	if out.Applied {
		h.Log.Info("paddle: plan changed", "event", ev.EventType, "subscription", ev.Data.ID, "plan", out.Plan, "sites", out.Sites, "default", out.Default)
	}
	return out, nil
}

// statusOf is the subscription's status after the event: the data's, which Paddle sends on
// every subscription event, else what the event's name says.
func statusOf(ev *event) string {
	switch s := ev.Data.Status; s {
	case "active", "trialing", "past_due", "paused", "canceled":
		return s
	}
	switch ev.EventType {
	case "subscription.canceled":
		return "canceled"
	case "subscription.past_due":
		return "past_due"
	case "subscription.paused":
		return "paused"
	}
	return "active"
}

// Verify checks a Paddle-Signature header against body: one of its h1 values must be the
// HMAC-SHA256 of "<ts>:<body>" under one of secrets, and ts within tolerance of now.
func Verify(header string, body []byte, secrets []string, tolerance time.Duration, now time.Time) error {
	if header == "" {
		return errors.New("no Paddle-Signature header")
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "ts":
			ts = v
		case "h1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return errors.New("the header is not ts=…;h1=…")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("its timestamp is not within " + tolerance.String() + " of now")
	}
	for _, secret := range secrets {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts))
		m.Write([]byte(":"))
		m.Write(body)
		want := m.Sum(nil)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return nil
			}
		}
	}
	return errors.New("no signature matches")
}
