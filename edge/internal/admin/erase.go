package admin

import (
	"context"
	"time"

	"spookat/edge/internal/files"
	"spookat/edge/internal/jobs"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Eraser erases a person to the bytes (files.ErasePerson, with the audit entry in the rows'
// commit), and tells the rest of the system: the workers, who drop the person's jobs still
// waiting in JOBS, and the site's webhook receiver (a person.erased event). The inbox and the
// command line both erase through it.
type Eraser struct {
	Store *store.Store
	Files files.Dir
	// Registry and PublishJob are the running edge's (nil on the file: then neither is told,
	// and the answer says so).
	Registry   *sites.Registry
	PublishJob func(ctx context.Context, j *schema.Job) error
}

// Audit records an action of the command line's (its actor is always the command line).
func (o *Ops) Audit(ctx context.Context, e store.AuditEntry) error {
	e.Actor, e.OperatorID, e.Address = store.ActorCLI, 0, ""
	return o.Store.Audit(ctx, e)
}

// AuditLog reads a site's log, or the installation's when no site is named.
func (o *Ops) AuditLog(ctx context.Context, req AuditRequest) ([]store.AuditEntry, error) {
	var siteID int64
	if req.SiteKey != "" {
		s, err := o.siteByKey(ctx, req.SiteKey)
		if err != nil {
			return nil, err
		}
		siteID = s.ID
	}
	return o.Store.AuditLog(ctx, siteID, req.AuditQuery)
}

// Erase erases the person sel names in the site (store.ErrNotFound when nobody matches);
// who is the audit entry's actor (operator, actor, address).
func (x Eraser) Erase(ctx context.Context, siteID int64, webhook bool, sel store.PersonSelector, who store.AuditEntry) (*ErasedPerson, error) {
	e, emptied, err := files.ErasePerson(ctx, x.Store, x.Files, siteID, sel, &who)
	if err != nil {
		return nil, err
	}
	out := &ErasedPerson{Erased: *e, WALEmptied: emptied, WebhookEvent: "none: the site has no webhook",
		WaitingJobs: "not dropped: no edge is running (its JOBS are delivered when it starts; erase again then)"}
	if x.Registry != nil {
		out.WaitingJobs = "dropped by the workers"
		if err := x.Registry.MarkErased(ctx, e.ConversationIDs, time.Now()); err != nil {
			out.WaitingJobs = "not dropped: " + err.Error()
		}
	}
	if webhook {
		out.WebhookEvent = "not sent: no edge is running to publish it (erase again with the edge running, or tell the receiver)"
		if x.PublishJob != nil {
			out.WebhookEvent = "queued"
			if err := x.PublishJob(ctx, jobs.Erasure(siteID, sel, e, time.Now())); err != nil {
				out.WebhookEvent = "not sent: " + err.Error()
			}
		}
	}
	return out, nil
}
