package store

import (
	"context"
	"encoding/json"
	"time"
)

// The audit log: operators' and the command line's actions on a site's settings, team and
// people, and operators' logins and passwords. Never a message's text or a secret's value.

// AuditAction names an audited action.
type AuditAction string

const (
	AuditLogin           AuditAction = "login"
	AuditLoginFailed     AuditAction = "login_failed"
	AuditLogout          AuditAction = "logout"
	AuditPasswordChanged AuditAction = "password_changed"
	AuditSettingsChanged AuditAction = "settings_changed" // detail: the fields sent
	AuditRoleChanged     AuditAction = "role_changed"
	AuditMemberRemoved   AuditAction = "member_removed"
	AuditInviteCreated   AuditAction = "invite_created"
	AuditInviteWithdrawn AuditAction = "invite_withdrawn"
	AuditInviteAccepted  AuditAction = "invite_accepted"
	AuditTokenCreated    AuditAction = "token_created"
	AuditTokenDeleted    AuditAction = "token_deleted"
	AuditPersonExported  AuditAction = "person_exported"
	AuditPersonErased    AuditAction = "person_erased"
	// The command line's (actor "cli").
	AuditRetentionChanged AuditAction = "retention_changed"
	AuditMemberAdded      AuditAction = "member_added"
	AuditOperatorAdded    AuditAction = "operator_added"
	AuditOperatorRemoved  AuditAction = "operator_removed"
	// The installation's, in no site's log (edge audit shows them).
	AuditCredsIssued  AuditAction = "creds_issued"  // detail: key, role, worker_id, expires
	AuditCredsRevoked AuditAction = "creds_revoked" // detail: keys
	AuditBackup       AuditAction = "backup"        // detail: file, messages, last_message_id
	AuditRestore      AuditAction = "restore"       // detail: file, taken_at, db
	// Paddle's (actor "paddle"): a subscription event moved a site's plan.
	AuditPlanChanged AuditAction = "plan_changed" // detail: plan (now), subscription_plan, status, subscription, event
)

// ActorCLI is the actor of the command line's entries.
const ActorCLI = "cli"

// AuditEntry is one line of the log.
type AuditEntry struct {
	ID         int64          `json:"id"`
	At         int64          `json:"at"`      // Unix ms
	SiteID     int64          `json:"site_id"` // 0: no site's
	OperatorID int64          `json:"operator_id"`
	Actor      string         `json:"actor"` // the operator's email, "cli", or the email a failed login tried
	Address    string         `json:"address,omitempty"`
	Action     AuditAction    `json:"action"`
	Detail     map[string]any `json:"detail,omitempty"`

	detail string // as stored
}

// AuditKeep is how long the log keeps an entry.
const AuditKeep = 366 * 24 * time.Hour

// Audit writes an entry in this transaction, and drops a few entries past AuditKeep.
func (tx *Tx) Audit(e AuditEntry) error {
	detail := ""
	if len(e.Detail) > 0 {
		b, err := json.Marshal(e.Detail)
		if err != nil {
			return err
		}
		detail = string(b)
	}
	if err := tx.exec(`INSERT INTO audit (at, site_id, operator_id, actor, address, action, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tx.now, e.SiteID, e.OperatorID, e.Actor, e.Address, string(e.Action), detail); err != nil {
		return err
	}
	// The oldest hundred by id are the oldest by time: looking at them alone keeps this a
	// read of a page or two however long the log (a filter on at would scan it all).
	return tx.exec(`DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY id LIMIT 100) AND at < ?`, tx.now-AuditKeep.Milliseconds())
}

// Audit writes an entry in a commit of its own.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	return s.Write(ctx, func(tx *Tx) error { return tx.Audit(e) })
}

// AuditQuery filters a site's log: all fields optional.
type AuditQuery struct {
	OperatorID int64       `json:"operator_id,omitempty"`
	Action     AuditAction `json:"action,omitempty"`
	From       int64       `json:"from,omitempty"` // Unix ms, inclusive
	To         int64       `json:"to,omitempty"`
	Before     int64       `json:"before,omitempty"` // an entry id: older ones (the next page)
	Limit      int         `json:"limit,omitempty"`  // default 100, at most 500
}

// AuditLog lists a site's entries, newest first: those of the site, and the logins and
// password changes of its operators (members now). Site 0: every entry of the installation.
func (s *Store) AuditLog(ctx context.Context, siteID int64, q AuditQuery) ([]AuditEntry, error) {
	if q.Limit <= 0 || q.Limit > 500 {
		q.Limit = 100
	}
	to, before := q.To, q.Before
	if to <= 0 {
		to = 1<<62 - 1
	}
	if before <= 0 {
		before = 1<<62 - 1
	}
	list, err := readList(ctx, s, `SELECT id, at, site_id, operator_id, actor, address, action, detail FROM audit
		WHERE (?1 = 0 OR site_id = ?1 OR (site_id = 0 AND operator_id IN (SELECT operator_id FROM site_members WHERE site_id = ?1)))
		AND (?2 = 0 OR operator_id = ?2) AND (?3 = '' OR action = ?3) AND at BETWEEN ?4 AND ?5 AND id < ?6
		ORDER BY id DESC LIMIT ?7`,
		[]any{siteID, q.OperatorID, string(q.Action), q.From, to, before, q.Limit}, func(e *AuditEntry) []any {
			return []any{&e.ID, &e.At, &e.SiteID, &e.OperatorID, &e.Actor, &e.Address, (*string)(&e.Action), &e.detail}
		})
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].detail != "" {
			_ = json.Unmarshal([]byte(list[i].detail), &list[i].Detail)
		}
	}
	return list, nil
}
