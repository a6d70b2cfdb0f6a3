// Package plans puts a hosted install's limits where they belong: in plans, not in brakes. A
// plans file (the edge's -plans) names the plans, the limits of each and the Paddle prices
// that buy them; a site is on the plan its Paddle subscription says (package paddle records
// it), else on the default plan. Without -plans there is no Config, no limit and no billing
// route: a self-hosted edge never notices this package.
package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Limits of a plan; 0 is no limit.
type Limits struct {
	// Sites is how many of the sites one subscription names get the plan (a customer's
	// account); the others stay on the default plan.
	Sites int `json:"sites"`
	// Operators is how many members a site may have.
	Operators int `json:"operators"`
	// ConversationsPerMonth is how many new conversations a site takes in a calendar month
	// (UTC); past it a visitor who has none gets a sentence instead, and one who has one
	// goes on in it.
	ConversationsPerMonth int `json:"conversations_per_month"`
	// StorageMB is what a site's attachments may hold (instead of -file-quota-mb).
	StorageMB int `json:"storage_mb"`
	// RetentionDaysMax is the longest a site keeps an idle conversation: a site's retention
	// may not be longer, and "keep" means this long.
	RetentionDaysMax int `json:"retention_days_max"`
}

// Plan is one plan of the file.
type Plan struct {
	Limits
	Name string `json:"-"` // its key in the file
	// PaddlePrices are the Paddle price ids (pri_…) a subscription item buys this plan with.
	PaddlePrices []string `json:"paddle_prices"`
}

// Config is the plans file.
type Config struct {
	// Default is the plan of a site with no subscription, or whose subscription was
	// canceled, paused, or past due beyond the grace.
	Default string `json:"default"`
	// PastDueGraceDays: a past-due subscription keeps its plan this many days (default 7).
	PastDueGraceDays int `json:"past_due_grace_days"`
	// PaddleSecrets are the secret keys of the Paddle notification destination: two while
	// one is rotated out. SPOOKAT_PADDLE_SECRETS (comma-separated) replaces them.
	PaddleSecrets []string `json:"paddle_secrets"`
	// PaddleToleranceSeconds bounds the age (and the lead) of a notification's signature
	// timestamp (default 5, as Paddle's own SDKs; more only for a clock you cannot trust).
	PaddleToleranceSeconds int              `json:"paddle_tolerance_seconds"`
	Plans                  map[string]*Plan `json:"plans"`

	byPrice map[string]*Plan
}

// Grace is how long a past-due subscription keeps its plan.
func (c *Config) Grace() time.Duration { return time.Duration(c.PastDueGraceDays) * 24 * time.Hour }

// Tolerance is how far a signature's timestamp may be from now.
func (c *Config) Tolerance() time.Duration {
	return time.Duration(c.PaddleToleranceSeconds) * time.Second
}

// ByPrice is the plan a Paddle price buys (nil: none of this file's).
func (c *Config) ByPrice(price string) *Plan { return c.byPrice[price] }

// Get is the named plan, or the default one when there is no such plan.
func (c *Config) Get(name string) *Plan {
	if p := c.Plans[name]; p != nil {
		return p
	}
	return c.Plans[c.Default]
}

// Load reads and checks a plans file; an error is a sentence naming the file and the field.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-plans %s: %w", path, err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("-plans %s: %w", path, err)
	}
	if env := os.Getenv("SPOOKAT_PADDLE_SECRETS"); env != "" {
		c.PaddleSecrets = strings.Split(env, ",")
	}
	if len(c.PaddleSecrets) == 0 {
		return nil, fmt.Errorf("-plans %s: paddle_secrets is empty: give the secret key of the Paddle notification destination (or SPOOKAT_PADDLE_SECRETS)", path)
	}
	return c, nil
}

// Parse checks a plans file's JSON (secrets may come later, from the environment).
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a plans file: %w (see ops/RUNBOOK.md, Plans and billing)", err)
	}
	if len(c.Plans) == 0 {
		return nil, errors.New(`plans is empty: name at least the default plan, e.g. {"default":"free","plans":{"free":{"conversations_per_month":100}}}`)
	}
	if c.Plans[c.Default] == nil {
		return nil, fmt.Errorf("default %q is not one of the plans (%s)", c.Default, strings.Join(names(c.Plans), ", "))
	}
	if c.PastDueGraceDays < 0 || c.PastDueGraceDays > 90 {
		return nil, errors.New("past_due_grace_days must be 0 to 90 (0: the default, 7)")
	}
	if c.PastDueGraceDays == 0 {
		c.PastDueGraceDays = 7
	}
	if c.PaddleToleranceSeconds < 0 || c.PaddleToleranceSeconds > 3600 {
		return nil, errors.New("paddle_tolerance_seconds must be 0 to 3600 (0: the default, 5)")
	}
	if c.PaddleToleranceSeconds == 0 {
		c.PaddleToleranceSeconds = 5
	}
	for i, s := range c.PaddleSecrets {
		if len(s) < 16 {
			return nil, fmt.Errorf("paddle_secrets[%d] is too short to be a Paddle secret key (pdl_ntfset_…)", i)
		}
	}
	c.byPrice = map[string]*Plan{}
	for _, name := range names(c.Plans) {
		p := c.Plans[name]
		if p == nil {
			return nil, fmt.Errorf("plans.%s is empty: give its limits", name)
		}
		p.Name = name
		for field, v := range map[string]int{"sites": p.Sites, "operators": p.Operators, "conversations_per_month": p.ConversationsPerMonth,
			"storage_mb": p.StorageMB, "retention_days_max": p.RetentionDaysMax} {
			if v < 0 {
				return nil, fmt.Errorf("plans.%s.%s must be 0 (no limit) or more, not %d", name, field, v)
			}
		}
		for _, price := range p.PaddlePrices {
			if !strings.HasPrefix(price, "pri_") {
				return nil, fmt.Errorf("plans.%s.paddle_prices: %q is not a Paddle price id (pri_…)", name, price)
			}
			if other := c.byPrice[price]; other != nil {
				return nil, fmt.Errorf("plans.%s.paddle_prices: %s buys plan %s already", name, price, other.Name)
			}
			c.byPrice[price] = p
		}
	}
	return &c, nil
}

func names(m map[string]*Plan) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
