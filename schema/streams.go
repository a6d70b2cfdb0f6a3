package schema

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream, bucket and subject names an SRE meets in `nats stream report`.
const (
	StreamJobs    = "JOBS"    // work queue: subjects jobs.<lane>.<site>.<conversation>
	StreamResults = "RESULTS" // subjects results.<lane>.<site>.<conversation>, consumed by the edge
	StreamDead    = "DEAD"    // jobs that used up their attempts: dead.<lane>.<site>.<conversation>

	BucketSites = "SITES" // key site.<id> → SiteDelivery JSON (secrets live here, not in jobs)

	ConsumerEdgeResults = "edge-results" // the edge's durable consumer on RESULTS
)

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id. The edge re-publishes
// unconfirmed jobs at start, so it must outlast a restart.
const DuplicateWindow = 10 * time.Minute

func conversationTokens(siteID, conversationID int64) string {
	return strconv.FormatInt(siteID, 10) + "." + strconv.FormatInt(conversationID, 10)
}

// JobSubject is where a job is published.
func JobSubject(lane string, siteID, conversationID int64) string {
	return "jobs." + lane + "." + conversationTokens(siteID, conversationID)
}

// ResultSubject is where a worker publishes the outcome of a job.
func ResultSubject(lane string, siteID, conversationID int64) string {
	return "results." + lane + "." + conversationTokens(siteID, conversationID)
}

// DeadSubject is where a job that used up its attempts is kept.
func DeadSubject(lane string, siteID, conversationID int64) string {
	return "dead." + lane + "." + conversationTokens(siteID, conversationID)
}

// SiteKey is a site's key in the SITES bucket.
func SiteKey(siteID int64) string { return "site." + strconv.FormatInt(siteID, 10) }

// StreamConfigs returns the streams the edge creates or updates at start. replicas is 1 on a
// single box and 3 on a cluster.
func StreamConfigs(replicas int) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        StreamJobs,
			Description: "delivery jobs, one per message and target",
			Subjects:    []string{"jobs.>"},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  DuplicateWindow,
			Replicas:    replicas,
		},
		{
			Name:        StreamResults,
			Description: "outcome of every delivery attempt, recorded by the edge",
			Subjects:    []string{"results.>"},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  2 * time.Minute,
			Replicas:    replicas,
		},
		{
			Name:        StreamDead,
			Description: "jobs that used up their attempts, with the last error (header Spookat-Error)",
			Subjects:    []string{"dead.>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      30 * 24 * time.Hour,
			Duplicates:  DuplicateWindow,
			Replicas:    replicas,
		},
	}
}

// EnsureStreams creates or updates every stream and bucket. Safe to run on every start.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	for _, cfg := range StreamConfigs(replicas) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return err
		}
	}
	_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketSites,
		Description: "delivery settings per site, read by workers",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	return err
}
