package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"spookat/schema"
)

// Site is a customer's site with its delivery settings.
type Site struct {
	ID                 int64    `json:"id"`
	Key                string   `json:"key"`
	Name               string   `json:"name"`
	Origins            []string `json:"origins"`
	SlackToken         string   `json:"slack_token,omitempty"`
	SlackChannel       string   `json:"slack_channel,omitempty"`
	SlackSigningSecret string   `json:"slack_signing_secret,omitempty"`
	DiscordWebhook     string   `json:"discord_webhook,omitempty"`
	// DiscordBotToken lets a worker hold the Discord gateway: replies come back. Write-only.
	DiscordBotToken string `json:"discord_bot_token,omitempty"`
	WebhookURL      string `json:"webhook_url,omitempty"`
	WebhookSecret   string `json:"webhook_secret,omitempty"`
	NotifyEmail     string `json:"notify_email,omitempty"`
	// IdentitySecret signs the site's user ids (identify's user_hash); write-only.
	IdentitySecret string `json:"identity_secret,omitempty"`
	// Widget is how the site's chat window looks and who it says answers.
	Widget schema.WidgetSettings `json:"widget"`
	// RetentionDays: a conversation idle this many days is deleted (retention.go); 0: never.
	RetentionDays int   `json:"retention_days"`
	CreatedAt     int64 `json:"created_at"`
}

// MaxRetentionDays bounds a site's retention (ten years): a larger number is a typo.
const MaxRetentionDays = 3650

// widgetJSON is how a site's widget settings are stored.
func widgetJSON(w schema.WidgetSettings) string {
	b, _ := json.Marshal(w) // a struct of strings: it cannot fail
	return string(b)
}

// widgetFrom reads stored widget settings; a row the edge could not read keeps the defaults.
func widgetFrom(s string) schema.WidgetSettings {
	var w schema.WidgetSettings
	_ = json.Unmarshal([]byte(s), &w)
	return w
}

// NewSiteKey returns a random public site key.
func NewSiteKey() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "st_" + base64.RawURLEncoding.EncodeToString(b)
}

// AddSite stores a new site (ID and CreatedAt are set on it).
func (tx *Tx) AddSite(site *Site) error {
	if site.Name == "" {
		return errors.New("a site needs a name")
	}
	if site.Key == "" {
		site.Key = NewSiteKey()
	}
	site.CreatedAt = tx.now
	if err := tx.exec(`INSERT INTO sites (key, name, origins, slack_token, slack_channel, slack_signing_secret,
		discord_webhook, webhook_url, webhook_secret, notify_email, created_at, widget, identity_secret, retention_days, discord_bot_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		site.Key, site.Name, strings.Join(site.Origins, "\n"), site.SlackToken, site.SlackChannel,
		site.SlackSigningSecret, site.DiscordWebhook, site.WebhookURL, site.WebhookSecret,
		site.NotifyEmail, tx.now, widgetJSON(site.Widget), site.IdentitySecret, site.RetentionDays, site.DiscordBotToken); err != nil {
		return err
	}
	site.ID = tx.LastInsertRowID()
	return nil
}

const siteColumns = `id, key, name, origins, slack_token, slack_channel, slack_signing_secret,
	discord_webhook, webhook_url, webhook_secret, notify_email, created_at, widget, identity_secret, retention_days, discord_bot_token`

// siteRow is a row of siteColumns being read: scan into dest, then take the Site.
type siteRow struct {
	s               Site
	origins, widget string
}

func (r *siteRow) dest() []any {
	return []any{&r.s.ID, &r.s.Key, &r.s.Name, &r.origins, &r.s.SlackToken, &r.s.SlackChannel, &r.s.SlackSigningSecret,
		&r.s.DiscordWebhook, &r.s.WebhookURL, &r.s.WebhookSecret, &r.s.NotifyEmail, &r.s.CreatedAt, &r.widget,
		&r.s.IdentitySecret, &r.s.RetentionDays, &r.s.DiscordBotToken}
}

func (r *siteRow) site() *Site {
	site := r.s
	site.Origins = splitLines(r.origins)
	site.Widget = widgetFrom(r.widget)
	return &site
}

// Sites returns every site, by id.
func (s *Store) Sites(ctx context.Context) ([]*Site, error) {
	var out []*Site
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT ` + siteColumns + ` FROM sites ORDER BY id`)
		if err != nil {
			return err
		}
		return eachRow(st, nil, func() error {
			var r siteRow
			if err := scan(st, r.dest()...); err != nil {
				return err
			}
			out = append(out, r.site())
			return nil
		})
	})
	return out, err
}

// SiteByID reads one site with its secrets in the writer's transaction (an update that
// starts from what is stored).
func (tx *Tx) SiteByID(id int64) (*Site, error) {
	var r siteRow
	found, err := tx.QueryRow(`SELECT `+siteColumns+` FROM sites WHERE id = ?`, []any{id}, r.dest()...)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return r.site(), nil
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Operator is a person who answers chats in the inbox.
type Operator struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
}

// AddOperator stores a new operator with a bcrypt hash of the password and makes them a
// member of the given sites (by key). An existing email is refused with ErrOperatorExists:
// resetting a password silently would keep the old sessions and tokens alive (see
// SetOperatorPassword).
func (tx *Tx) AddOperator(email, name, password string, siteKeys []string) (*Operator, error) {
	email = strings.TrimSpace(email)
	if !strings.Contains(email, "@") {
		return nil, fmt.Errorf("%q is not an email address", email)
	}
	if _, found, err := tx.OperatorByEmail(email); err != nil {
		return nil, err
	} else if found {
		return nil, ErrOperatorExists
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name, _, _ = strings.Cut(email, "@")
	}
	op := &Operator{Email: email, Name: name}
	if _, err := tx.QueryRow(`INSERT INTO operators (email, name, password_hash, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		[]any{email, name, hash, tx.now}, &op.ID); err != nil {
		return nil, err
	}
	for _, key := range siteKeys {
		if err := tx.addMember(key, op.ID, RoleOwner); err != nil { // the CLI's operators have every right, as before roles
			return nil, err
		}
	}
	return op, nil
}
