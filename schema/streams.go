package schema

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream, bucket and subject names an SRE meets in `nats stream report`.
const (
	StreamJobs    = "JOBS"    // work queue: published on jobs.<lane>.<site>.<conversation>, stored as jobs.<lane>.<partition>.<site>.<conversation>
	StreamResults = "RESULTS" // subjects results.<worker>: batches of results (JSON lines), consumed by the edge
	StreamDead    = "DEAD"    // jobs that used up their attempts: dead.<lane>.<site>.<conversation>
	StreamInbound = "INBOUND" // subjects inbound.<worker>: what a worker heard from outside (Inbound, one JSON each), recorded by the edge

	BucketSites   = "SITES"   // key site.<id> → SiteDelivery JSON (secrets live here, not in jobs)
	BucketThreads = "THREADS" // key <target>.<site>.<conversation> → thread id (Slack parent ts), shared by all workers
	BucketWorkers = "WORKERS" // key w.<worker id> → heartbeat; a key expires when its worker dies
	// BucketInboundFiles is the object store of the files workers fetched from outside
	// (Inbound.File), kept until the edge takes them (72 h at most).
	BucketInboundFiles = "INBOUND_FILES"

	ConsumerEdgeResults = "edge-results" // the edge's durable consumer on RESULTS
	ConsumerEdgeInbound = "edge-inbound" // the edge's durable consumer on INBOUND
)

// JobPartitions is the number of partitions of a lane. The JOBS stream stamps each job with
// partition(JobPartitions, site, conversation) when it is stored, so every job of a conversation
// lands in the same partition; each partition has one durable consumer that one worker at a time
// owns (pinned client), which is how order per conversation holds over N workers. It is also the
// most workers a lane can use. Changing it re-partitions only new jobs: drain JOBS first.
const JobPartitions = 16

// jobsTransform stamps the partition into the stored subject. Only 4-token subjects (what the
// edge publishes) match the source, so a job replayed with its stored 5-token subject keeps it.
var jobsTransform = &jetstream.SubjectTransformConfig{
	Source:      "jobs.*.*.*",
	Destination: "jobs.{{wildcard(1)}}.{{partition(" + strconv.Itoa(JobPartitions) + ",2,3)}}.{{wildcard(2)}}.{{wildcard(3)}}",
}

// JobShards is how many consumers a lane has. Chat and webhook lanes keep order per
// conversation, so they have one consumer per partition; email sends one notification per new
// conversation, order does not matter, so one consumer covers the lane.
func JobShards(lane string) int {
	if lane == LaneEmail {
		return 1
	}
	return JobPartitions
}

// JobConsumer names the durable consumer of a lane's shard, e.g. "jobs-chat-07".
func JobConsumer(lane string, shard int) string {
	return "jobs-" + lane + "-" + strconv.Itoa(shard/10) + strconv.Itoa(shard%10)
}

// JobShardFilter is the filter subject of a lane's shard on the (partitioned) JOBS stream.
func JobShardFilter(lane string, shard int) string {
	if JobShards(lane) == 1 {
		return "jobs." + lane + ".>"
	}
	return "jobs." + lane + "." + strconv.Itoa(shard) + ".>"
}

// JobPriorityGroup is the priority group of every job consumer: pull requests name it, and the
// server delivers to one pinned client at a time.
const JobPriorityGroup = "owner"

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

// ResultSubject is where a worker publishes its batches of results (see DecodeResults). The
// worker id becomes one subject token (see Token).
func ResultSubject(workerID string) string { return "results." + Token(workerID) }

// InboundSubject is where a worker publishes what it heard from outside (one Inbound a
// message): its own subject, as for results.
func InboundSubject(workerID string) string { return "inbound." + Token(workerID) }

// DeadSubject is where a job that used up its attempts is kept.
func DeadSubject(lane string, siteID, conversationID int64) string {
	return "dead." + lane + "." + conversationTokens(siteID, conversationID)
}

// KeyUncleanStart is the SITES key under which the edge, started after its last run crashed
// or lost its power, says when it started (its payload UncleanStart, signed as a site's is):
// the embedded JetStream may have lost acknowledgements of jobs delivered just before, so a
// worker marks the jobs of JOBS messages stored before then as possible repeats.
const KeyUncleanStart = "edge.unclean-start"

// KeyErased is the SITES key under which the edge lists the conversations of people erased
// in the last ErasedKeep (its payload Erased, signed as a site's is): workers drop their jobs
// still in JOBS, unsent and not copied to DEAD, so an erased person's words leave no further
// trace.
const KeyErased = "edge.erased"

// ErasedKeep is how long an erased conversation stays in KeyErased: longer than a job can wait
// for its retries (about 29 hours).
const ErasedKeep = 72 * time.Hour

// Erased is the payload under KeyErased: conversation id → when it was erased (Unix ms).
type Erased struct {
	Conversations map[int64]int64 `json:"conversations"`
}

// UncleanStart is the payload under KeyUncleanStart.
type UncleanStart struct {
	At time.Time `json:"at"`
}

// SiteKey is a site's key in the SITES bucket.
func SiteKey(siteID int64) string { return "site." + strconv.FormatInt(siteID, 10) }

// Byte budgets of the streams on disk, the edge's -jobs-max-bytes, -results-max-bytes and
// -dead-max-bytes. They are sized for a small box (a 20-40 GB disk that also holds the SQLite
// file and its backups): together under 2.5 GiB. JOBS at 1 GiB holds a few million jobs, hours
// of ordinary traffic with every worker or Slack away; RESULTS at 1 GiB is history (the edge
// records outcomes within seconds), so it bounds what an SRE can read back, not what is
// delivered; DEAD at 256 MiB holds a very bad day of dead letters.
const (
	DefaultJobsMaxBytes    int64 = 1 << 30
	DefaultResultsMaxBytes int64 = 1 << 30
	DefaultDeadMaxBytes    int64 = 256 << 20
	// INBOUND holds operators' replies from outside for three days at most; the edge records
	// them within a second. Full, it refuses new ones (the worker retries) rather than drop
	// replies not yet recorded.
	DefaultInboundMaxBytes int64 = 256 << 20
)

// StreamLimits are the byte budgets of JOBS, RESULTS and DEAD (0: the default).
type StreamLimits struct {
	JobsMaxBytes    int64
	ResultsMaxBytes int64
	DeadMaxBytes    int64
	InboundMaxBytes int64
}

// WithDefaults fills each budget left at 0 with its default.
func (l StreamLimits) WithDefaults() StreamLimits {
	if l.JobsMaxBytes <= 0 {
		l.JobsMaxBytes = DefaultJobsMaxBytes
	}
	if l.ResultsMaxBytes <= 0 {
		l.ResultsMaxBytes = DefaultResultsMaxBytes
	}
	if l.DeadMaxBytes <= 0 {
		l.DeadMaxBytes = DefaultDeadMaxBytes
	}
	if l.InboundMaxBytes <= 0 {
		l.InboundMaxBytes = DefaultInboundMaxBytes
	}
	return l
}

// StreamConfigs returns the streams the edge creates or updates at start. replicas is 1 on a
// single box and 3 on a cluster.
func StreamConfigs(replicas int, limits StreamLimits) []jetstream.StreamConfig {
	limits = limits.WithDefaults()
	return []jetstream.StreamConfig{
		{
			Name:             StreamJobs,
			Description:      "delivery jobs, one per message and target",
			Subjects:         []string{"jobs.>"},
			SubjectTransform: jobsTransform,
			Retention:        jetstream.WorkQueuePolicy,
			// Jobs are work, not history: a full JOBS refuses new jobs ("maximum bytes
			// exceeded") and the edge keeps them above its watermark until there is room,
			// rather than dropping the oldest undelivered ones.
			MaxBytes:   limits.JobsMaxBytes,
			Discard:    jetstream.DiscardNew,
			Storage:    jetstream.FileStorage,
			Duplicates: DuplicateWindow,
			Replicas:   replicas,
		},
		{
			Name:        StreamResults,
			Description: "outcome of every delivery attempt, recorded by the edge",
			Subjects:    []string{"results.>"},
			// Limits, not work queue: the edge acks a whole batch at once (AckAll, which a
			// work queue refuses), and an SRE can read three days of outcomes back, as far
			// as the byte budget allows: full, it drops the oldest.
			Retention:  jetstream.LimitsPolicy,
			MaxAge:     72 * time.Hour,
			MaxBytes:   limits.ResultsMaxBytes,
			Discard:    jetstream.DiscardOld,
			Storage:    jetstream.FileStorage,
			Duplicates: 2 * time.Minute,
			Replicas:   replicas,
		},
		{
			Name:        StreamDead,
			Description: "jobs that used up their attempts, with the last error (header Spookat-Error)",
			Subjects:    []string{"dead.>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      30 * 24 * time.Hour,
			// History too: full, it drops the oldest dead letters (an alert says so).
			MaxBytes:   limits.DeadMaxBytes,
			Discard:    jetstream.DiscardOld,
			Duplicates: DuplicateWindow,
			Replicas:   replicas,
		},
		{
			Name:        StreamInbound,
			Description: "what workers hear from outside (Discord replies), recorded by the edge",
			Subjects:    []string{"inbound.>"},
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      72 * time.Hour,
			MaxBytes:    limits.InboundMaxBytes,
			Discard:     jetstream.DiscardNew,
			Storage:     jetstream.FileStorage,
			// A gateway's resend within the window is stored once (Nats-Msg-Id: Inbound.ID);
			// later ones the edge's client id catches.
			Duplicates: DuplicateWindow,
			Replicas:   replicas,
		},
	}
}

// EnsureStreams creates or updates every stream and bucket. Safe to run on every start: an
// existing stream takes changed byte budgets on the update.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, replicas int, limits StreamLimits) error {
	for _, cfg := range StreamConfigs(replicas, limits) {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	if _, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      BucketInboundFiles,
		Description: "files workers fetched from outside (Discord attachments), until the edge takes them",
		TTL:         72 * time.Hour,
		MaxBytes:    limits.WithDefaults().InboundMaxBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}); err != nil {
		return fmt.Errorf("object store %s: %w", BucketInboundFiles, err)
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketSites,
		Description: "delivery settings per site, read by workers",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}); err != nil {
		return err
	}
	return EnsureWorkerBuckets(ctx, js, replicas, DefaultWorkerTTL)
}

// DefaultWorkerTTL is how long a worker's heartbeat key lives in WORKERS without a refresh:
// the time other workers take to notice a dead worker and take its partitions.
const DefaultWorkerTTL = 10 * time.Second

// EnsureWorkerBuckets creates or updates the buckets workers share: THREADS (thread ids of
// conversations, kept a while after the last post) and WORKERS (membership; keys expire after
// ttl and leave a marker, so watchers hear of a dead worker without polling).
func EnsureWorkerBuckets(ctx context.Context, js jetstream.JetStream, replicas int, ttl time.Duration) error {
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketThreads,
		Description: "thread id per conversation and chat target, shared by workers",
		History:     1,
		TTL:         90 * 24 * time.Hour,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}); err != nil {
		return err
	}
	_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         BucketWorkers,
		Description:    "live workers (heartbeats); partitions are spread over these",
		History:        1,
		TTL:            ttl,
		LimitMarkerTTL: max(ttl, time.Second),
		Storage:        jetstream.MemoryStorage,
		Replicas:       replicas,
	})
	return err
}

// ThreadKey is a conversation's key in the THREADS bucket.
func ThreadKey(target string, siteID, conversationID int64) string {
	return target + "." + conversationTokens(siteID, conversationID)
}

// DiscordThreadSiteKey is the THREADS key naming the site whose conversation opened a Discord
// thread (its value: the site id), for the gateway to know a reply written there is the
// site's. thread must be a Discord id (digits).
func DiscordThreadSiteKey(thread string) string { return "discord-thread." + thread }

// DiscordSessionKey is the THREADS key of a site's Discord gateway session (its id, resume
// URL and last sequence handed over, JSON), so the worker that takes the site over resumes it.
func DiscordSessionKey(siteID int64) string {
	return "discord-session." + strconv.FormatInt(siteID, 10)
}
