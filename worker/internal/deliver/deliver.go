// Package deliver holds what every outside target (Slack, Discord, webhooks, email) shares:
// the Sender interface the lanes drive and the Outcome a delivery attempt ends with.
package deliver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"spookat/schema"
)

// Sender delivers jobs of one target. Send is called with one job, or with several consecutive
// jobs of one conversation when the sender merges (see Merger). ctx ends at a hard stop; the
// attempt must also end by deadline. They come apart because a context with a deadline
// costs a timer per attempt, which shows in a Slack post's profile; a sender whose client
// takes a deadline (fasthttp) uses it directly, the others call WithDeadline.
type Sender interface {
	Send(ctx context.Context, deadline time.Time, site *schema.SiteDelivery, jobs []*schema.Job) Outcome
}

// Gate is implemented by senders with per-destination rate limits (a Slack channel, a Discord
// webhook). Wait tells how long a job must wait before it may be sent, without taking an
// in-flight slot; limited reports that the destination is being rate limited right now.
type Gate interface {
	Wait(site *schema.SiteDelivery, job *schema.Job) (wait time.Duration, limited bool)
}

// Merger is implemented by senders that can post several queued messages of one conversation
// as one post. MergeMax is the most jobs one post may carry (0 or 1: no merging).
type Merger interface {
	MergeMax() int
}

// Outcome of one attempt.
type Outcome struct {
	ExternalID string // id of the post at the target (Slack ts, Discord message id)
	ThreadID   string // thread of the conversation at the target, when it has one
	Err        error
	// Permanent: retrying cannot help (unknown channel, revoked token, 4xx). The job goes to DEAD.
	Permanent bool
	// RateLimited: the target said "later" (429). The sender has already blocked the destination
	// for RetryAfter; the attempt does not count against the job's attempts.
	RateLimited bool
	RetryAfter  time.Duration
	// Dropped: the job's conversation was erased (schema.KeyErased): acknowledged, not
	// delivered, no result and no copy in DEAD.
	Dropped bool
}

// OK reports a delivered job.
func (o Outcome) OK() bool { return o.Err == nil }

// Fail builds a retryable failure.
func Fail(err error) Outcome { return Outcome{Err: err} }

// Permanent builds a failure that goes straight to DEAD.
func Permanent(err error) Outcome { return Outcome{Err: err, Permanent: true} }

// RateLimited builds a 429 outcome.
func RateLimited(after time.Duration) Outcome {
	return Outcome{Err: fmt.Errorf("rate limited, retry after %s", after), RateLimited: true, RetryAfter: after}
}

// ErrNoSite is returned when a job's site has no delivery settings (yet) in SITES.
var ErrNoSite = errors.New("site has no delivery settings in the SITES bucket")

// ErrNotFetchable is a download of a file from outside that cannot succeed (gone, too
// large, refused): not tried again.
var ErrNotFetchable = errors.New("not fetchable")

// ErrNotConfigured is returned when the site no longer has this target configured.
var ErrNotConfigured = errors.New("target not configured for this site")
