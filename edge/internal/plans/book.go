package plans

import (
	"context"
	"fmt"
	"sync"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Book is what the running edge knows of plans: each site's recorded plan and how many
// conversations each site started this month (UTC). It hears the writer's commits (a
// store.CommitListener, among the store's Counters: before the commit's acks go out) and
// the Paddle handler's changes, and answers the limits.
type Book struct {
	Config *Config
	Clock  func() time.Time
	// Notify hears, once a month a site, that a visitor was refused a new conversation
	// (the edge tells the site's operators); called without the Book's lock.
	Notify func(siteID int64, plan *Plan, month string)

	mu    sync.Mutex
	sites map[int64]store.SitePlan
	month string
	convs map[int64]int
	// held counts, per site, the new conversations admitted whose first message is not
	// answered yet: they take a place in the month's limit until then, so that visitors
	// arriving together cannot all take the last one.
	held map[int64]int
	told map[int64]bool // this month
}

// NewBook is an empty Book (Load fills it); it is the store's commit listener before the
// store opens.
func NewBook(c *Config, clock func() time.Time) *Book {
	if clock == nil {
		clock = time.Now
	}
	month, _ := monthOf(clock())
	return &Book{Config: c, Clock: clock, sites: map[int64]store.SitePlan{}, month: month, convs: map[int64]int{}, held: map[int64]int{}, told: map[int64]bool{}}
}

// Load reads the recorded plans and this month's conversations from the store, before any
// message is taken.
func (b *Book) Load(ctx context.Context, st *store.Store) error {
	list, err := st.SitePlans(ctx)
	if err != nil {
		return err
	}
	month, start := monthOf(b.Clock())
	convs, err := st.ConversationsSince(ctx, start.UnixMilli())
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range list {
		b.sites[p.SiteID] = p
	}
	b.month, b.convs, b.told = month, convs, map[int64]bool{}
	return nil
}

// monthOf is t's calendar month (UTC) and its first instant.
func monthOf(t time.Time) (string, time.Time) {
	t = t.UTC()
	start := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start.Format("2006-01"), start
}

// roll starts a new month's counts (b.mu held).
func (b *Book) roll(now time.Time) {
	if m, _ := monthOf(now); m != b.month {
		b.month, b.convs, b.told = m, map[int64]int{}, map[int64]bool{}
	}
}

// Plan is the plan a site is on now: its subscription's while active or trialing, or past
// due within the grace; else the default plan.
func (b *Book) Plan(siteID int64) *Plan {
	b.mu.Lock()
	p, ok := b.sites[siteID]
	b.mu.Unlock()
	return b.Config.Get(b.effective(p, ok))
}

func (b *Book) effective(p store.SitePlan, ok bool) string {
	if !ok {
		return b.Config.Default
	}
	switch p.Status {
	case "active", "trialing":
		return p.Plan
	case "past_due":
		if b.Clock().Sub(time.UnixMilli(p.PastDueSince)) < b.Config.Grace() {
			return p.Plan
		}
	}
	return b.Config.Default
}

// Set records a site's plan as the Paddle handler stored it.
func (b *Book) Set(p store.SitePlan) {
	b.mu.Lock()
	b.sites[p.SiteID] = p
	b.mu.Unlock()
}

// Usage is a site's plan and its conversations this month.
type Usage struct {
	Plan          string `json:"plan"`
	Status        string `json:"status,omitempty"` // the subscription's; "" on the default plan without one
	Month         string `json:"month"`
	Conversations int    `json:"conversations"`
	Limits        Limits `json:"limits"`
}

// Usage reports a site's plan and use.
func (b *Book) Usage(siteID int64) Usage {
	b.mu.Lock()
	b.roll(b.Clock())
	p, ok := b.sites[siteID]
	n, month := b.convs[siteID], b.month
	b.mu.Unlock()
	plan := b.Config.Get(b.effective(p, ok))
	return Usage{Plan: plan.Name, Status: p.Status, Month: month, Conversations: n, Limits: plan.Limits}
}

// AdmitConversation says whether a site may start one more conversation this month; if not,
// the sentence its visitor gets. The first refusal of a month tells the operators (Notify).
// An admitted conversation holds its place until release is called, once, when its first
// message is answered (stored or not; the commit has counted it by then) or given up;
// release is nil when refused.
func (b *Book) AdmitConversation(siteID int64) (release func(), sentence string) {
	plan := b.Plan(siteID)
	limit := plan.ConversationsPerMonth
	if limit == 0 {
		return noHold, ""
	}
	b.mu.Lock()
	b.roll(b.Clock())
	if b.convs[siteID]+b.held[siteID] < limit {
		b.held[siteID]++
		b.mu.Unlock()
		return func() { b.release(siteID) }, ""
	}
	first := !b.told[siteID]
	b.told[siteID] = true
	month := b.month
	b.mu.Unlock()
	if first && b.Notify != nil {
		b.Notify(siteID, plan, month)
	}
	return nil, "This chat is not taking new conversations right now. Please try again later, or reach the site another way."
}

func noHold() {}

func (b *Book) release(siteID int64) {
	b.mu.Lock()
	if b.held[siteID]--; b.held[siteID] <= 0 {
		delete(b.held, siteID)
	}
	b.mu.Unlock()
}

// Committed counts the conversations the commit started (a store.CommitListener).
func (b *Book) Committed(msgs []store.Committed) {
	var now time.Time
	for i := range msgs {
		m := &msgs[i]
		if !m.First || m.Author != schema.AuthorVisitor {
			continue
		}
		if now.IsZero() {
			now = b.Clock()
			b.mu.Lock()
			b.roll(now)
			defer b.mu.Unlock()
		}
		b.convs[m.SiteID]++
	}
}

// CheckOperators refuses one more member of a site past its plan's operators.
func (b *Book) CheckOperators(siteID int64, members int) error {
	p := b.Plan(siteID)
	if p.Operators > 0 && members >= p.Operators {
		return fmt.Errorf("the site's plan (%s) has room for %d operators: remove a member or change the plan", p.Name, p.Operators)
	}
	return nil
}

// CheckRetention refuses a retention past the plan's maximum (days 0: keep forever).
func (b *Book) CheckRetention(siteID int64, days int) error {
	p := b.Plan(siteID)
	if max := p.RetentionDaysMax; max > 0 && (days == 0 || days > max) {
		return fmt.Errorf("the site's plan (%s) keeps conversations %d days at most: choose 1 to %d", p.Name, max, max)
	}
	return nil
}

// Quota is a site's attachment storage under its plan, in bytes (0: the edge's own quota).
func (b *Book) Quota(siteID int64) int64 {
	return int64(b.Plan(siteID).StorageMB) * 1_000_000
}
