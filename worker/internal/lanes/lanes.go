// Package lanes runs the delivery lanes (chat, webhook, email). A lane consumes its shards of
// the JOBS stream (one durable consumer per partition; see schema.JobPartitions), keeps one FIFO
// per conversation and target, and sends the head of each FIFO while the lane has a free
// in-flight slot. So conversations proceed in parallel and each one strictly in order.
//
// Order across workers: a partition is owned by one worker at a time (the consumer's pinned
// client), and a worker taking over a partition holds back until every job the previous owner
// had taken is either acked or back in its own hands (see checkTaint), then sends in stream
// order. Retries happen in memory (the conversation waits) instead of NakWithDelay, because a
// nak would let the next message of the conversation overtake the failed one.
package lanes

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"spookat/schema"
	"spookat/worker/internal/deliver"
	"spookat/worker/internal/metrics"
	"spookat/worker/internal/sites"
)

// Config of one lane.
type Config struct {
	Lane        string
	InFlight    int           // deliveries in progress at once
	MaxAttempts int           // then DEAD
	RetryBase   time.Duration // first retry delay; doubles per attempt
	RetryMax    time.Duration // cap of one delay
	SendTimeout time.Duration // one attempt
	AckWait     time.Duration // consumer ack wait; held jobs are kept alive with +WPI
	PullExpiry  time.Duration // pull request expiry (an idle lane sends one per expiry per shard)
	PullBatch   int           // messages buffered per shard
	// A partition stops taking messages while it holds HoldJobs jobs or HoldBytes bytes of
	// them (see Partition.full): JOBS messages are batches whose size follows the publish
	// window and the rate, so the consumer's MaxAckPending, a count of messages, does not
	// bound what a worker keeps in memory while a target is down. 0: no bound.
	HoldJobs  int
	HoldBytes int
}

// Env is what lanes share.
type Env struct {
	JS      jetstream.JetStream
	Stream  jetstream.Stream
	Sites   *sites.Cache
	Senders map[string]deliver.Sender // by target
	Out     *ResultPublisher
	M       *metrics.M
	Log     *slog.Logger
}

// Lane is one lane of one worker.
type Lane struct {
	cfg     Config
	env     Env
	targets map[string]*metrics.Target
	sendCtx context.Context // cancelled when a stop runs out of time

	queuedG, inflightG, fullG prometheus.Gauge // this lane's children, looked up once

	mu        sync.Mutex
	shards    []*Partition
	convs     map[convKey]*conv
	ready     []*conv
	inflight  int
	held      int
	kaRunning bool
	tasks     chan task  // idle runners wait here
	room      *sync.Cond // on mu: a full partition's receive waits here for its hold to shrink
	claiming  bool       // a runner's finish is kicking: its first send stays with it
	claimed   claim      // that send, while claiming
}

type convKey struct {
	target       string
	site, convID int64
}

// keyOf is the conversation of a job, for a target.
func keyOf(j *schema.Job) convKey { return convKey{j.Target, j.SiteID, j.ConversationID} }

type conv struct {
	key     convKey
	shard   *Partition
	items   []*item // sorted by stream sequence
	busy    bool    // head is being sent
	waiting bool    // a retry or rate-limit timer will kick it
	inReady bool
}

// item is one job: alone in its JOBS message, or one line of a batch.
type item struct {
	d        *delivery
	c        *conv
	data     []byte
	job      schema.Job
	pos      uint64 // order within the shard (see pos)
	attempts int
	sending  bool // in an attempt
	finished bool // delivered, dead or given back
}

// Partition is one durable consumer of the lane: one partition of JOBS for chat and webhook,
// the whole lane for email.
type Partition struct {
	lane *Lane
	N    int
	Name string

	op sync.Mutex // serialises acquire and release

	// guarded by lane.mu
	want     bool
	owned    bool
	gen      int
	cons     jetstream.Consumer
	cc       jetstream.ConsumeContext
	pinID    string
	lastSeq  uint64 // consumer sequence of the last delivery taken since acquire
	tainted  bool
	checking bool
	unacked  int // JOBS messages held (len(seen))
	jobs     int // jobs in the messages held, finished or not
	bytes    int // their size
	waiting  int // receives waiting for room (0 or 1: one Consume callback at a time)
	inflight int
	partial  int  // batches started and not finished
	handing  bool // releasing: only conversations with a job of a started batch are sent
	seen     map[uint64]*delivery
	// byConv indexes seen by conversation: the messages in hand holding a job of each, so
	// that a finished message finds an earlier one of its conversations (blocker) without
	// comparing every job in hand with each of its own.
	byConv  map[convKey][]*delivery
	convs   map[*conv]struct{}
	drained chan struct{}
}

// New builds a lane; it consumes nothing until its shards are acquired.
func New(cfg Config, env Env, sendCtx context.Context) *Lane {
	l := &Lane{cfg: cfg, env: env, sendCtx: sendCtx, convs: make(map[convKey]*conv),
		targets: make(map[string]*metrics.Target), tasks: make(chan task),
		queuedG: env.M.Queued.WithLabelValues(cfg.Lane), inflightG: env.M.InFlight.WithLabelValues(cfg.Lane),
		fullG: env.M.Full.WithLabelValues(cfg.Lane)}
	l.room = sync.NewCond(&l.mu)
	for t := range env.Senders {
		l.targets[t] = env.M.For(cfg.Lane, t)
	}
	for i := range schema.JobShards(cfg.Lane) {
		l.shards = append(l.shards, &Partition{lane: l, N: i, Name: schema.JobConsumer(cfg.Lane, i),
			seen: make(map[uint64]*delivery), convs: make(map[*conv]struct{})})
	}
	return l
}

// Name is the lane's name.
func (l *Lane) Name() string { return l.cfg.Lane }

// Partitions lists the lane's partitions (one consumer each; the email lane has one).
func (l *Lane) Partitions() []*Partition { return l.shards }

// ConsumerConfig is the durable consumer of a shard: explicit acks, no server-side retry limit
// (the worker counts attempts itself), one pinned client at a time. Its state is kept in
// memory: with file state the server rewrote a state file (temp file + rename) of every
// busy consumer many times a second (its cost: bench/comments.md). On a work
// queue that is safe: acked jobs are deleted from the stream, so a server restart only
// redelivers the unacked ones, in stream order, as a worker crash does.
func ConsumerConfig(lane string, shard int, ackWait, pinnedTTL time.Duration, maxAckPending int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        schema.JobConsumer(lane, shard),
		Description:    "spookat " + lane + " jobs, shard " + strconv.Itoa(shard) + "; one worker at a time",
		FilterSubject:  schema.JobShardFilter(lane, shard),
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     -1,
		MaxAckPending:  maxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		PriorityGroups: []string{schema.JobPriorityGroup},
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PinnedTTL:      pinnedTTL,
		MemoryStorage:  true,
	}
}

// Idle reports whether the lane holds no job (tests, shutdown).
func (l *Lane) Idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held == 0 && l.inflight == 0
}
