package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"spookat/edge/internal/store"
	"spookat/schema/natsauth"
)

// RevokeRequest names NATS credentials to revoke: one key, or every one of a worker id.
type RevokeRequest struct {
	Key      string `json:"key,omitempty"`
	WorkerID string `json:"worker_id,omitempty"`
}

// RevokeResult says what was revoked and whether a server applied it already.
type RevokeResult struct {
	Revoked []natsauth.Record `json:"revoked"`
	// Applied: the running edge's embedded NATS closed those connections. External: the
	// edge runs on an external NATS, which applies it when reloaded with `edge nats-config`.
	Applied  bool `json:"applied"`
	External bool `json:"external"`
}

// AuthApplier hands a changed account JWT to the NATS server the running edge embeds
// (broker.Broker); false when the server is external.
type AuthApplier interface {
	ApplyAuth() (bool, error)
}

// RevokeCreds revokes credentials in the data directory's authority and, inside a running
// edge, applies the revocation to its NATS server.
func (o *Ops) RevokeCreds(ctx context.Context, req RevokeRequest) (*RevokeResult, error) {
	if o.Auth == nil {
		return nil, errors.New("no NATS authority in this data directory")
	}
	done, err := o.Auth.Revoke(req.Key, req.WorkerID)
	if err != nil {
		return nil, err
	}
	res := &RevokeResult{Revoked: done}
	if len(done) > 0 && o.Store != nil {
		keys := make([]string, len(done))
		for i, r := range done {
			keys[i] = r.Key
		}
		if err := o.Store.Audit(ctx, store.AuditEntry{Actor: store.ActorCLI, Action: store.AuditCredsRevoked, Detail: map[string]any{"keys": keys}}); err != nil {
			return nil, fmt.Errorf("revoked, but not recorded in the audit log: %w", err)
		}
	}
	if o.NATS != nil {
		applied, err := o.NATS.ApplyAuth()
		if err != nil {
			return nil, err
		}
		res.Applied, res.External = applied, !applied
	}
	return res, nil
}

// RevokeCreds implements API.
func (c *Client) RevokeCreds(ctx context.Context, req RevokeRequest) (*RevokeResult, error) {
	return call[RevokeResult](ctx, c, http.MethodPost, "/creds/revoke", req)
}
