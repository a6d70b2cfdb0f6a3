package jobs

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Erasure is the webhook job that tells a site's receiver a person was erased (schema
// Erasure: the ids it had in earlier events, and the email or user id asked by), so that it
// can erase its copies. It belongs to no message; the edge publishes it alone.
func Erasure(siteID int64, sel store.PersonSelector, e *store.Erased, at time.Time) *schema.Job {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ref := hex.EncodeToString(b[:])
	return &schema.Job{ID: schema.ErasureJobID(ref), Lane: schema.LaneWebhook, Target: schema.TargetWebhook, SiteID: siteID,
		Author: schema.AuthorSystem, CreatedAt: at,
		Erasure: &schema.Erasure{Ref: ref, Email: sel.Email, UserID: sel.UserID, VisitorIDs: e.VisitorIDs, ConversationIDs: e.ConversationIDs, At: at}}
}
