// Package admin holds the scriptable admin operations (sites, operators, seeding) behind one
// interface with two implementations: Ops runs them on a store (inside the running edge, or
// on the file directly when no edge holds it), Client sends them to a running edge over the
// unix socket admin.sock in its data directory. The edge stays the only writer while it runs.
package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"spookat/edge/internal/files"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
)

// SocketName and LockName are files in the data directory.
const (
	SocketName = "admin.sock"
	LockName   = "edge.lock"
)

// API is what the admin commands can do.
type API interface {
	AddSite(ctx context.Context, s *store.Site) (*store.Site, error)
	ListSites(ctx context.Context) ([]SiteInfo, error)
	AddOperator(ctx context.Context, req OperatorRequest) (*store.Operator, error)
	Seed(ctx context.Context, req SeedRequest) (*SeedResult, error)
	RevokeCreds(ctx context.Context, req RevokeRequest) (*RevokeResult, error)
	SetPassword(ctx context.Context, req PasswordRequest) (*store.Operator, error)
	RemoveOperator(ctx context.Context, req OperatorRef) (*store.Operator, error)
	ListOperators(ctx context.Context) ([]OperatorInfo, error)
	AddMember(ctx context.Context, req MemberRequest) (*MemberResult, error)
	RemoveMember(ctx context.Context, req MemberRequest) (*MemberResult, error)
	SetRetention(ctx context.Context, req RetentionRequest) (*SiteInfo, error)
	ExportPerson(ctx context.Context, req PersonRequest) (*store.PersonExport, error)
	ErasePerson(ctx context.Context, req PersonRequest) (*ErasedPerson, error)
	// Audit records an action the command line took on files (credentials issued, a backup);
	// AuditLog reads the log (a site's, or the installation's).
	Audit(ctx context.Context, e store.AuditEntry) error
	AuditLog(ctx context.Context, req AuditRequest) ([]store.AuditEntry, error)
}

// AuditRequest filters the audit log: a site's (by key) or, without one, the installation's.
type AuditRequest struct {
	SiteKey string `json:"site_key,omitempty"`
	store.AuditQuery
}

// ErasedPerson is what an erasure deleted, and whether the WAL could be emptied after it.
type ErasedPerson struct {
	store.Erased
	WALEmptied bool `json:"wal_emptied"`
	// WebhookEvent says what became of the person.erased event for the site's receiver.
	WebhookEvent string `json:"webhook_event"`
	// WaitingJobs says whether the workers drop the person's jobs still in JOBS.
	WaitingJobs string `json:"waiting_jobs"`
}

// PersonRequest names a person in a site (store.PersonSelector: exactly one of its fields).
type PersonRequest struct {
	SiteKey string `json:"site_key"`
	store.PersonSelector
}

// RetentionRequest sets how many days a site keeps an idle conversation (0: forever).
type RetentionRequest struct {
	SiteKey string `json:"site_key"`
	Days    int    `json:"days"`
}

// SiteInfo is a site as `edge site list` shows it: secrets are reported as set or not.
type SiteInfo struct {
	ID      int64    `json:"id"`
	Key     string   `json:"key"`
	Name    string   `json:"name"`
	Origins []string `json:"origins"`
	Targets []string `json:"targets"`
	// BrakeLevel is the flood brake's level (0: not braked); known only while an edge runs.
	BrakeLevel int `json:"brake_level"`
	// RetentionDays: conversations idle this long are deleted (0: kept).
	RetentionDays int   `json:"retention_days"`
	CreatedAt     int64 `json:"created_at"`
}

// OperatorRequest adds an operator.
type OperatorRequest struct {
	Email    string   `json:"email"`
	Name     string   `json:"name,omitempty"`
	Password string   `json:"password"`
	SiteKeys []string `json:"site_keys"`
}

// SeedRequest creates N test sites for load tests.
type SeedRequest struct {
	Sites         int    `json:"sites"`
	NamePrefix    string `json:"name_prefix,omitempty"`
	Origin        string `json:"origin,omitempty"`
	SlackToken    string `json:"slack_token,omitempty"` // each seeded site gets its own channel C<n>
	WebhookURL    string `json:"webhook_url,omitempty"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// SeedResult lists the seeded sites.
type SeedResult struct {
	Sites []SeedSite `json:"sites"`
}

// SeedSite is one seeded site.
type SeedSite struct {
	ID  int64  `json:"id"`
	Key string `json:"key"`
}

// Ops runs admin operations on a store. Registry and NATS are the running edge's (nil when
// the file is opened directly): sites added are put there so they serve at once, and a
// revocation reaches the embedded NATS server at once.
type Ops struct {
	Store    *store.Store
	Registry *sites.Registry
	Auth     *natsauth.Authority
	NATS     AuthApplier
	// Sessions closes operators' live websockets (the edge's inbox hub); nil on the file.
	Sessions Sessions
	// Files are the attachments (an erasure removes a person's).
	Files files.Dir
	// PublishJob hands JOBS a job of no message (an erasure's webhook event); nil on the file.
	PublishJob func(ctx context.Context, j *schema.Job) error
}

// AddSite stores a site.
func (o *Ops) AddSite(ctx context.Context, s *store.Site) (*store.Site, error) {
	if len(s.Origins) == 0 {
		return nil, errors.New("a site needs at least one allowed origin (-origin https://example.com, or * for development)")
	}
	if err := o.Store.WriteDurable(ctx, func(tx *store.Tx) error { return tx.AddSite(s) }); err != nil {
		return nil, err
	}
	return s, o.publish(ctx, s)
}

// SetRetention changes a site's retention; the edge's maintenance applies it within a minute.
func (o *Ops) SetRetention(ctx context.Context, req RetentionRequest) (*SiteInfo, error) {
	if req.Days < 0 || req.Days > store.MaxRetentionDays {
		return nil, fmt.Errorf("-days must be between 0 (keep conversations) and %d", store.MaxRetentionDays)
	}
	var site *store.Site
	err := o.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if site, err = tx.SetRetention(req.SiteKey, req.Days); err != nil {
			return err
		}
		return tx.Audit(store.AuditEntry{SiteID: site.ID, Actor: store.ActorCLI, Action: store.AuditRetentionChanged, Detail: map[string]any{"days": req.Days}})
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no site with key %s (see edge site list)", req.SiteKey)
	}
	if err != nil {
		return nil, err
	}
	info := InfoOf(site)
	return &info, nil
}

// ExportPerson gathers what a site holds about one person (the document; the CLI adds the
// attachments from the data directory).
func (o *Ops) ExportPerson(ctx context.Context, req PersonRequest) (*store.PersonExport, error) {
	site, err := o.personSite(ctx, req)
	if err != nil {
		return nil, err
	}
	p, err := o.Store.ExportPerson(ctx, site.ID, req.PersonSelector)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errors.New("no visitor of this site matches: check the email, user id or visitor id")
	}
	if err == nil {
		_ = o.Store.Audit(ctx, store.AuditEntry{SiteID: site.ID, Actor: store.ActorCLI, Action: store.AuditPersonExported,
			Detail: map[string]any{"by": req.Kind(), "visitors": len(p.Visitors), "conversations": len(p.Conversations)}})
	}
	return p, err
}

// personSite checks a person request and finds its site.
func (o *Ops) personSite(ctx context.Context, req PersonRequest) (*store.Site, error) {
	if err := req.Check(); err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "a visitor id, an email or a user id", "-visitor, -email or -user", 1))
	}
	return o.siteByKey(ctx, req.SiteKey)
}

func (o *Ops) siteByKey(ctx context.Context, key string) (*store.Site, error) {
	sites, err := o.Store.Sites(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sites {
		if s.Key == key {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no site with key %s (see edge site list)", key)
}

// ErasePerson erases what a site holds about one person, to the bytes (files.ErasePerson).
func (o *Ops) ErasePerson(ctx context.Context, req PersonRequest) (*ErasedPerson, error) {
	site, err := o.personSite(ctx, req)
	if err != nil {
		return nil, err
	}
	x := Eraser{Store: o.Store, Files: o.Files, Registry: o.Registry, PublishJob: o.PublishJob}
	out, err := x.Erase(ctx, site.ID, site.WebhookURL != "", req.PersonSelector, store.AuditEntry{Actor: store.ActorCLI})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errors.New("no visitor of this site matches: check the email, user id or visitor id")
	}
	return out, err
}

func (o *Ops) publish(ctx context.Context, list ...*store.Site) error {
	if o.Registry == nil {
		return nil
	}
	return o.Registry.Put(ctx, list...)
}

// InfoOf is a site as the CLI shows it: its delivery targets named, no secret.
func InfoOf(s *store.Site) SiteInfo {
	info := SiteInfo{ID: s.ID, Key: s.Key, Name: s.Name, Origins: s.Origins, CreatedAt: s.CreatedAt, Targets: []string{}, RetentionDays: s.RetentionDays}
	if s.SlackToken != "" && s.SlackChannel != "" {
		info.Targets = append(info.Targets, "slack:"+s.SlackChannel)
	}
	if s.DiscordWebhook != "" {
		info.Targets = append(info.Targets, "discord")
	}
	if s.WebhookURL != "" {
		info.Targets = append(info.Targets, "webhook:"+s.WebhookURL)
	}
	if s.NotifyEmail != "" {
		info.Targets = append(info.Targets, "email:"+s.NotifyEmail)
	}
	return info
}

// ListSites lists every site.
func (o *Ops) ListSites(ctx context.Context) ([]SiteInfo, error) {
	list, err := o.Store.Sites(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SiteInfo, 0, len(list))
	for _, s := range list {
		info := InfoOf(s)
		if o.Registry != nil {
			if live := o.Registry.ByID(s.ID); live != nil {
				info.BrakeLevel = live.Brake.Level()
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// AddOperator stores a new operator with site memberships; an existing email is refused
// with the commands that change an operator instead.
func (o *Ops) AddOperator(ctx context.Context, req OperatorRequest) (*store.Operator, error) {
	if len(req.SiteKeys) == 0 {
		return nil, errors.New("an operator needs at least one site: -site KEY (see `edge site list`)")
	}
	var op *store.Operator
	err := o.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if op, err = tx.AddOperator(req.Email, req.Name, req.Password, req.SiteKeys); err != nil {
			return err
		}
		return tx.Audit(store.AuditEntry{OperatorID: op.ID, Actor: store.ActorCLI, Action: store.AuditOperatorAdded, Detail: map[string]any{"email": op.Email}})
	})
	if errors.Is(err, store.ErrOperatorExists) {
		e := strings.TrimSpace(req.Email)
		return nil, fmt.Errorf("operator %s exists already; set a new password with `edge operator passwd -email %s -password-stdin`, add a site with `edge site member add -site KEY -email %s`", e, e, e)
	}
	return op, err
}

// Seed creates req.Sites sites in one transaction.
func (o *Ops) Seed(ctx context.Context, req SeedRequest) (*SeedResult, error) {
	if req.Sites < 1 || req.Sites > 100_000 {
		return nil, errors.New("-sites must be between 1 and 100,000")
	}
	if req.NamePrefix == "" {
		req.NamePrefix = "load"
	}
	if req.Origin == "" {
		req.Origin = "*"
	}
	list := make([]*store.Site, req.Sites)
	err := o.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		for i := range list {
			s := &store.Site{
				Name:          fmt.Sprintf("%s-%05d", req.NamePrefix, i+1),
				Origins:       []string{req.Origin},
				WebhookURL:    req.WebhookURL,
				WebhookSecret: req.WebhookSecret,
			}
			if req.SlackToken != "" {
				s.SlackToken = req.SlackToken
				s.SlackChannel = fmt.Sprintf("C%s%05d", req.NamePrefix, i+1)
			}
			if err := tx.AddSite(s); err != nil {
				return err
			}
			list[i] = s
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := &SeedResult{Sites: make([]SeedSite, len(list))}
	for i, s := range list {
		res.Sites[i] = SeedSite{ID: s.ID, Key: s.Key}
	}
	return res, o.publish(ctx, list...)
}

// Lock takes the data directory's lock file, held by a running edge for its whole life.
// ok is false when another process holds it.
func Lock(dataDir string) (f *os.File, ok bool, err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, err
	}
	f, err = os.OpenFile(filepath.Join(dataDir, LockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}
