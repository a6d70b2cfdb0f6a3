package store

import (
	"context"
	"strings"
)

// Plans and billing (migration 22): written only by an edge started with -plans.

// SitePlan is a site's plan as its Paddle subscription last said.
type SitePlan struct {
	SiteID         int64  `json:"site_id"`
	Plan           string `json:"plan"`
	Status         string `json:"status"`
	SubscriptionID string `json:"subscription_id"`
	PastDueSince   int64  `json:"past_due_since,omitempty"` // Unix ms
	UpdatedAt      int64  `json:"updated_at"`
}

// SitePlans lists every site's recorded plan.
func (s *Store) SitePlans(ctx context.Context) ([]SitePlan, error) {
	return readList(ctx, s, `SELECT site_id, plan, status, subscription_id, past_due_since, updated_at FROM site_plans`, nil,
		func(p *SitePlan) []any {
			return []any{&p.SiteID, &p.Plan, &p.Status, &p.SubscriptionID, &p.PastDueSince, &p.UpdatedAt}
		})
}

// SetSitePlan records a site's plan; a site already past due keeps when it became so.
func (tx *Tx) SetSitePlan(p *SitePlan) error {
	p.UpdatedAt = tx.now
	return tx.exec(`INSERT INTO site_plans (site_id, plan, status, subscription_id, past_due_since, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		ON CONFLICT (site_id) DO UPDATE SET plan = ?2, status = ?3, subscription_id = ?4, updated_at = ?6,
			past_due_since = CASE WHEN ?3 != 'past_due' THEN 0 WHEN site_plans.past_due_since != 0 THEN site_plans.past_due_since ELSE ?5 END`,
		p.SiteID, p.Plan, p.Status, p.SubscriptionID, p.PastDueSince, tx.now)
}

// PaddleEventSeen records a Paddle event id; seen: it was recorded before (a redelivery).
// Ids older than 90 days go (Paddle retries for three days).
func (tx *Tx) PaddleEventSeen(eventID string) (seen bool, err error) {
	if err := tx.exec(`INSERT INTO paddle_events (event_id, received_at) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING`, eventID, tx.now); err != nil {
		return false, err
	}
	seen = tx.c.Changes() == 0
	return seen, tx.exec(`DELETE FROM paddle_events WHERE received_at < ?`, tx.now-90*24*3600*1000)
}

// PaddleSubscription is the last event applied of a subscription (found false: none yet).
func (tx *Tx) PaddleSubscription(id string) (occurredAt int64, sites []string, found bool, err error) {
	var lines string
	found, err = tx.QueryRow(`SELECT occurred_at, sites FROM paddle_subscriptions WHERE id = ?`, []any{id}, &occurredAt, &lines)
	return occurredAt, splitLines(lines), found, err
}

// SetPaddleSubscription records the last event applied of a subscription.
func (tx *Tx) SetPaddleSubscription(id string, occurredAt int64, status, plan string, sites []string) error {
	return tx.exec(`INSERT INTO paddle_subscriptions (id, occurred_at, status, plan, sites) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (id) DO UPDATE SET occurred_at = ?2, status = ?3, plan = ?4, sites = ?5`,
		id, occurredAt, status, plan, strings.Join(sites, "\n"))
}

// CapRetention shortens a site's retention to max days (a plan's maximum) when it keeps
// conversations longer, or forever; changed: it did.
func (tx *Tx) CapRetention(siteID int64, max int) (changed bool, err error) {
	if max <= 0 {
		return false, nil
	}
	err = tx.exec(`UPDATE sites SET retention_days = ?1 WHERE id = ?2 AND (retention_days = 0 OR retention_days > ?1)`, max, siteID)
	return err == nil && tx.c.Changes() == 1, err
}

// ConversationsSince counts each site's conversations created at or after since (Unix ms).
func (s *Store) ConversationsSince(ctx context.Context, since int64) (map[int64]int, error) {
	type row struct {
		site int64
		n    int
	}
	list, err := readList(ctx, s, `SELECT site_id, count(*) FROM conversations WHERE created_at >= ? GROUP BY site_id`, []any{since},
		func(r *row) []any { return []any{&r.site, &r.n} })
	out := map[int64]int{}
	for _, r := range list {
		out[r.site] = r.n
	}
	return out, err
}

// PlanNotice records that a site's operators are told of month's limit; first: not before.
func (tx *Tx) PlanNotice(siteID int64, month string) (first bool, err error) {
	if err := tx.exec(`INSERT INTO plan_notices (site_id, month) VALUES (?, ?) ON CONFLICT DO NOTHING`, siteID, month); err != nil {
		return false, err
	}
	return tx.c.Changes() == 1, nil
}
