package server

import (
	"context"
	"fmt"
	"time"

	"spookat/edge/internal/plans"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// capRetention makes every site keep conversations no longer than its plan's maximum (a
// site created on the command line, or one whose plan shrank while the edge was down).
func (e *Edge) capRetention() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err := e.store.Write(ctx, func(tx *store.Tx) error {
		for _, s := range e.sites.All() {
			changed, err := tx.CapRetention(s.ID, e.plans.Plan(s.ID).RetentionDaysMax)
			if err != nil {
				return err
			}
			if changed {
				n++
			}
		}
		return nil
	})
	if n > 0 {
		e.log.Info("plans: sites' retention shortened to their plan's maximum", "sites", n)
	}
	return err
}

// planNotice tells a site's operators, once a month, that its plan took no more new
// conversations: recorded (so a restart does not tell them again) and pushed to their open
// inboxes.
func (e *Edge) planNotice(siteID int64, p *plans.Plan, month string) {
	go func() { // Notify runs on a visitor's socket: the write waits elsewhere
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first := false
		if err := e.store.Write(ctx, func(tx *store.Tx) (err error) {
			first, err = tx.PlanNotice(siteID, month)
			return err
		}); err != nil {
			e.log.Warn("plan notice not recorded", "site", siteID, "err", err)
			return
		}
		if !first {
			return
		}
		e.log.Info("a site reached its plan's conversations for the month", "site", siteID, "plan", p.Name, "limit", p.ConversationsPerMonth)
		text := fmt.Sprintf("This site has had its plan's %d new conversations for %s (plan %s): new visitors are told the chat is not taking conversations until next month or a larger plan. Conversations under way go on.",
			p.ConversationsPerMonth, month, p.Name)
		e.operators.PlanNotice(siteID, text)
		// And by email, to the site's notify address (the worker's email lane; no address:
		// the inbox alone).
		s := e.sites.ByID(siteID)
		if s == nil || s.NotifyEmail == "" {
			return
		}
		ref := fmt.Sprintf("plan%d-%s", siteID, month)
		j := &schema.Job{ID: schema.NoticeJobID(ref), Lane: schema.LaneEmail, Target: schema.TargetEmail, SiteID: siteID,
			Author: schema.AuthorSystem, CreatedAt: time.Now(),
			Notice: &schema.Notice{Ref: ref, Subject: s.Name + " has had its plan's new conversations for " + month, Text: text}}
		if err := e.publishJob(ctx, j); err != nil {
			e.log.Warn("plan notice email not published", "site", siteID, "err", err)
		}
	}()
}
