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
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
}

// Env is what lanes share.
type Env struct {
	JS      jetstream.JetStream
	Stream  jetstream.Stream
	Sites   *sites.Cache
	Senders map[string]deliver.Sender // by target
	Out     *Outbox
	M       *metrics.M
	Log     *slog.Logger
}

// Lane is one lane of one worker.
type Lane struct {
	cfg     Config
	env     Env
	targets map[string]*metrics.Target
	sendCtx context.Context // cancelled when a stop runs out of time

	queuedG, inflightG prometheus.Gauge // this lane's children, looked up once

	mu        sync.Mutex
	shards    []*Shard
	convs     map[convKey]*conv
	ready     []*conv
	inflight  int
	held      int
	kaRunning bool
	tasks     chan task // idle runners wait here
}

type convKey struct {
	target       string
	site, convID int64
}

type conv struct {
	key     convKey
	shard   *Shard
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

// Shard is one durable consumer of the lane (one partition for chat and webhook).
type Shard struct {
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
	inflight int
	partial  int  // batches started and not finished
	handing  bool // releasing: only conversations with a job of a started batch are sent
	seen     map[uint64]*delivery
	convs    map[*conv]struct{}
	drained  chan struct{}
}

// New builds a lane; it consumes nothing until its shards are acquired.
func New(cfg Config, env Env, sendCtx context.Context) *Lane {
	l := &Lane{cfg: cfg, env: env, sendCtx: sendCtx, convs: make(map[convKey]*conv),
		targets: make(map[string]*metrics.Target), tasks: make(chan task),
		queuedG: env.M.Queued.WithLabelValues(cfg.Lane), inflightG: env.M.InFlight.WithLabelValues(cfg.Lane)}
	for t := range env.Senders {
		l.targets[t] = env.M.For(cfg.Lane, t)
	}
	for i := range schema.JobShards(cfg.Lane) {
		l.shards = append(l.shards, &Shard{lane: l, N: i, Name: schema.JobConsumer(cfg.Lane, i),
			seen: make(map[uint64]*delivery), convs: make(map[*conv]struct{})})
	}
	return l
}

// Name is the lane's name.
func (l *Lane) Name() string { return l.cfg.Lane }

// Shards lists the lane's shards.
func (l *Lane) Shards() []*Shard { return l.shards }

// ConsumerConfig is the durable consumer of a shard: explicit acks, no server-side retry limit
// (the worker counts attempts itself), one pinned client at a time. Its state is kept in
// memory: with file state the server rewrote a state file (temp file + rename) of every
// busy consumer many times a second, a tenth of the edge's CPU at 1,000 jobs/s. On a work
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

// SetWant records whether this worker should own the shard and moves towards it.
func (s *Shard) SetWant(ctx context.Context, want bool, drainTimeout time.Duration) {
	l := s.lane
	l.mu.Lock()
	s.want = want
	l.mu.Unlock()
	go s.reconcile(ctx, drainTimeout)
}

// SetWantSync is SetWant that returns once the shard got there (used at stop).
func (s *Shard) SetWantSync(want bool, drainTimeout time.Duration) {
	l := s.lane
	l.mu.Lock()
	s.want = want
	l.mu.Unlock()
	s.reconcile(context.Background(), drainTimeout)
}

func (s *Shard) reconcile(ctx context.Context, drainTimeout time.Duration) {
	s.op.Lock()
	defer s.op.Unlock()
	l := s.lane
	l.mu.Lock()
	want, owned := s.want, s.owned
	l.mu.Unlock()
	switch {
	case want && !owned:
		if err := s.acquire(ctx); err != nil && ctx.Err() == nil {
			// A cluster electing the consumer's leader answers nothing for seconds: try
			// again, or the partition would wait for the next change of members.
			l.env.Log.Warn("acquire shard; trying again in 1s", "consumer", s.Name, "err", err)
			time.AfterFunc(time.Second, func() { s.reconcile(ctx, drainTimeout) })
		}
	case !want && owned:
		s.release(drainTimeout)
	}
}

func (s *Shard) acquire(ctx context.Context) error {
	l := s.lane
	cons, err := l.env.Stream.Consumer(ctx, s.Name) // a fresh handle: no stale pin id
	if err != nil {
		return err
	}
	l.mu.Lock()
	s.gen++
	gen := s.gen
	s.owned, s.cons, s.pinID, s.lastSeq = true, cons, "", 0
	l.mu.Unlock()
	cc, err := cons.Consume(func(m jetstream.Msg) { l.receive(s, gen, m) },
		jetstream.PullPriorityGroup(schema.JobPriorityGroup),
		jetstream.PullExpiry(l.cfg.PullExpiry),
		jetstream.PullMaxMessages(l.cfg.PullBatch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				l.env.Log.Debug("consume", "consumer", s.Name, "err", err)
			}
		}))
	if err != nil {
		l.mu.Lock()
		s.owned = false
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	s.cc = cc
	l.mu.Unlock()
	l.env.M.Partitions.WithLabelValues(l.cfg.Lane).Inc()
	return nil
}

// release hands the shard over: stop pulling, let in-flight sends finish and finish the
// batches it has started (bounded), give the messages not started back (nak, in order), wait
// for acks to be out, then unpin so the next owner is pinned at once instead of after the
// pinned TTL.
func (s *Shard) release(drainTimeout time.Duration) {
	l := s.lane
	l.mu.Lock()
	s.owned = false
	s.handing = true
	s.gen++
	cc := s.cc
	s.cc = nil
	l.mu.Unlock()
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	if cc != nil {
		// Drain, not Stop: messages already on their way to us are received (and given back
		// by receive, as the generation changed) instead of dropped, where they would hold the
		// next owner back for a whole ack wait.
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-timer.C:
			timer.Reset(0)
		}
	}
	l.mu.Lock()
	var drained chan struct{}
	if s.inflight > 0 || s.partial > 0 {
		drained = make(chan struct{})
		s.drained = drained
		for c := range s.convs {
			l.kick(c) // the started batches' conversations go on
		}
	}
	l.mu.Unlock()
	if drained != nil {
		select {
		case <-drained:
		case <-timer.C:
			l.env.Log.Warn("release: in-flight deliveries or started batches still running; their delivered jobs may be repeated by the next owner", "consumer", s.Name)
		}
	}
	// Give back what was not started, in stream order.
	l.mu.Lock()
	s.handing = false
	s.drained = nil
	var back []*item
	for c := range s.convs {
		if c.busy {
			continue
		}
		back = append(back, c.items...)
	}
	msgs := l.takeBack(s, back)
	l.queuedG.Set(float64(l.held))
	l.mu.Unlock()
	giveBack(msgs)
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	l.env.Out.Flush(ctx)
	if err := l.env.Stream.UnpinConsumer(ctx, s.Name, schema.JobPriorityGroup); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		l.env.Log.Debug("unpin", "consumer", s.Name, "err", err)
	}
	l.env.M.Partitions.WithLabelValues(l.cfg.Lane).Dec()
}

// settled signals release once nothing is in flight and no started batch is unfinished.
// Lock held.
func (s *Shard) settled() {
	if s.drained != nil && s.inflight == 0 && s.partial == 0 {
		close(s.drained)
		s.drained = nil
	}
}

// receive is the Consume callback of a shard (one goroutine per shard, in delivery order).
func (l *Lane) receive(s *Shard, gen int, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		_ = m.Term()
		return
	}
	d := &delivery{shard: s, msg: m, seq: meta.Sequence.Stream, touched: time.Now()}
	attempts := int(meta.NumDelivered) - 1
	var bad []*item
	schema.SplitJobs(m.Headers().Get(schema.HeaderJobs) != "", m.Data(), func(line []byte) {
		it := &item{d: d, data: line, attempts: attempts, pos: pos(d.seq, len(d.items))}
		d.items = append(d.items, it)
		if err := schema.DecodeJob(line, &it.job); err != nil || it.job.ID == "" {
			// Not a job: nothing can deliver it. Keep it in DEAD for a human.
			bad = append(bad, it)
		}
	})
	d.left = len(d.items)
	if len(d.items) == 0 || len(d.items) > maxBatchJobs {
		_ = m.Term()
		l.env.Log.Warn("JOBS message without jobs or with too many; terminated", "consumer", s.Name, "seq", d.seq, "jobs", len(d.items))
		return
	}
	pin := m.Headers().Get("Nats-Pin-Id")

	l.mu.Lock()
	if s.gen != gen || !s.owned {
		l.mu.Unlock()
		_ = m.Nak() // handed over meanwhile; the next owner takes it
		return
	}
	// A gap in the consumer's delivery sequence is a delivery lost on its way to us (the
	// connection dropped, a cluster node died): JetStream counts that message as ours and
	// will send it again only after its ack wait, so the jobs after it must not overtake it.
	// Every delivery counts, redeliveries of what we hold too.
	cseq := meta.Sequence.Consumer
	gap := s.lastSeq != 0 && cseq > s.lastSeq+1
	s.lastSeq = max(s.lastSeq, cseq)
	if old := s.seen[d.seq]; old != nil {
		// Redelivered while we still hold it (ack wait passed): keep one copy, fresh handle.
		old.msg, old.touched = m, d.touched
		if gap {
			l.taint(s, gen)
		}
		l.mu.Unlock()
		return
	}
	if pin != s.pinID || gap {
		// Newly pinned (jobs the previous owner took may still be out there) or a delivery
		// lost: hold the shard until every job taken is acked or in our hands.
		s.pinID = pin
		l.taint(s, gen)
	}
	s.seen[d.seq] = d
	s.unacked++
	for _, it := range d.items {
		if slices.Contains(bad, it) {
			continue
		}
		l.held++
		key := convKey{it.job.Target, it.job.SiteID, it.job.ConversationID}
		c := l.convs[key]
		if c == nil {
			c = &conv{key: key, shard: s}
			l.convs[key] = c
			s.convs[c] = struct{}{}
		}
		it.c = c
		// Insert in stream order: almost always an append; a redelivery from a previous
		// owner can be older than what we hold.
		i := len(c.items)
		for i > 0 && c.items[i-1].pos > it.pos {
			i--
		}
		c.items = slices.Insert(c.items, i, it)
		l.kick(c)
	}
	l.queuedG.Set(float64(l.held))
	if !l.kaRunning {
		l.kaRunning = true
		go l.keepAlive()
	}
	l.mu.Unlock()
	if len(bad) > 0 {
		l.dead(bad, errors.New("undecodable job"), nil)
	}
}

// taint holds the shard back until checkTaint clears it. Lock held.
func (l *Lane) taint(s *Shard, gen int) {
	s.tainted = true
	if !s.checking {
		s.checking = true
		go l.checkTaint(s, gen)
	}
}

// checkTaint polls the consumer while the shard is held back (only right after a takeover):
// once the consumer's ack-pending count is no more than what we hold, every job taken before
// is done or ours, and sending in stream order keeps each conversation in order.
func (l *Lane) checkTaint(s *Shard, gen int) {
	every := min(max(l.cfg.AckWait/20, 50*time.Millisecond), time.Second)
	for {
		l.mu.Lock()
		cons := s.cons
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := cons.Info(ctx)
		cancel()
		l.mu.Lock()
		if s.gen != gen {
			if s.owned && s.tainted {
				// Released and taken again while we slept: the new ownership is held back
				// too, and this is its only checker (receive starts none while one runs).
				gen = s.gen
				l.mu.Unlock()
				continue
			}
			s.checking = false
			l.mu.Unlock()
			return
		}
		if err == nil && info.NumAckPending <= s.unacked {
			s.tainted, s.checking = false, false
			for c := range s.convs {
				l.kick(c)
			}
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		time.Sleep(every)
	}
}

// keepAlive tells JetStream that held jobs (waiting behind their conversation's head, or for
// a retry) are still being worked on. It runs only while the lane holds jobs.
func (l *Lane) keepAlive() {
	every := max(l.cfg.AckWait/3, 100*time.Millisecond)
	t := time.NewTicker(min(every, time.Second)) // also the check of acks held too long
	defer t.Stop()
	var msgs []jetstream.Msg
	for range t.C {
		now := time.Now()
		l.mu.Lock()
		if l.held == 0 {
			l.kaRunning = false
			l.mu.Unlock()
			return
		}
		msgs = msgs[:0]
		var acks []jetstream.Msg
		for _, s := range l.shards {
			acks = append(acks, s.overdue(now)...)
			for _, d := range s.seen {
				if now.Sub(d.touched) >= every {
					d.touched = now
					msgs = append(msgs, d.msg)
				}
			}
		}
		l.mu.Unlock()
		if len(acks) > 0 {
			l.env.Out.Publish(nil, nil, acks) // after the results already queued
		}
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// kick starts the conversation's head if it can go now. Lock held.
func (l *Lane) kick(c *conv) {
	if c.busy || c.waiting || c.inReady || len(c.items) == 0 || c.shard.tainted {
		return
	}
	if !c.shard.owned && !(c.shard.handing && c.finishesBatch()) {
		return
	}
	if l.inflight >= l.cfg.InFlight {
		c.inReady = true
		l.ready = append(l.ready, c)
		return
	}
	head := c.items[0]
	sender := l.env.Senders[head.job.Target]
	site := l.env.Sites.Peek(head.job.SiteID)
	n := 1
	if g, ok := sender.(deliver.Gate); ok && site != nil {
		wait, limited := g.Wait(site, &head.job)
		if wait > 0 {
			l.wait(c, wait)
			return
		}
		if mg, ok := sender.(deliver.Merger); ok && limited && !head.job.First {
			for n < len(c.items) && n < mg.MergeMax() && !c.items[n].job.First {
				n++
			}
		}
	}
	batch := slices.Clone(c.items[:n])
	for _, it := range batch {
		it.sending = true
		c.shard.start(it.d)
	}
	c.busy = true
	c.shard.inflight++
	l.inflight++
	l.inflightG.Set(float64(l.inflight))
	l.dispatch(task{c, batch, sender, site})
}

type task struct {
	c      *conv
	batch  []*item
	sender deliver.Sender
	site   *schema.SiteDelivery
}

// dispatch hands a send to an idle runner, or starts one. Runners live on while there is work
// (their stacks are already grown to what an HTTP call needs; a fresh goroutine per send spent
// ~5 % of the CPU growing its stack) and exit after a quiet spell, so an idle lane has none.
func (l *Lane) dispatch(t task) {
	select {
	case l.tasks <- t:
	default:
		go l.runner(t)
	}
}

func (l *Lane) runner(t task) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		l.send(t.c, t.batch, t.sender, t.site)
		idle.Reset(runnerIdle)
		select {
		case t = <-l.tasks:
		case <-idle.C:
			return
		}
	}
}

const runnerIdle = 20 * time.Second

// wait parks a conversation without an in-flight slot. Lock held.
func (l *Lane) wait(c *conv, d time.Duration) {
	c.waiting = true
	time.AfterFunc(d, func() {
		l.mu.Lock()
		c.waiting = false
		l.kick(c)
		l.dropIfIdle(c)
		l.mu.Unlock()
	})
}

// pump fills free slots from the ready queue. Lock held.
func (l *Lane) pump() {
	for l.inflight < l.cfg.InFlight && len(l.ready) > 0 {
		c := l.ready[0]
		l.ready[0] = nil
		l.ready = l.ready[1:]
		c.inReady = false
		l.kick(c)
	}
	if len(l.ready) == 0 {
		l.ready = l.ready[:0:0] // let the backing array go after a burst
	}
}

func (l *Lane) send(c *conv, batch []*item, sender deliver.Sender, site *schema.SiteDelivery) {
	start := time.Now()
	deadline := start.Add(l.cfg.SendTimeout)
	var out deliver.Outcome
	if sender == nil {
		out = deliver.Permanent(fmt.Errorf("no sender for target %q", batch[0].job.Target))
	} else {
		if site == nil {
			ctx, cancel := context.WithDeadline(l.sendCtx, deadline)
			var err error
			site, err = l.env.Sites.Get(ctx, batch[0].job.SiteID)
			cancel()
			if err == nil && site == nil {
				err = deliver.ErrNoSite
			}
			if err != nil {
				out = deliver.Fail(err)
			}
		}
		if site != nil {
			jobs := make([]*schema.Job, len(batch))
			for i, it := range batch {
				jobs[i] = &it.job
			}
			out = sender.Send(l.sendCtx, deadline, site, jobs)
		}
	}
	l.finish(c, batch, out, start)
}

// finish records an attempt's outcome. Results are published (and jobs acked) outside the lock.
func (l *Lane) finish(c *conv, batch []*item, out deliver.Outcome, start time.Time) {
	now := time.Now()
	head := batch[0]
	tm := l.targets[head.job.Target]
	if tm != nil {
		tm.Latency.Observe(now.Sub(start).Seconds())
	}
	var done []*item
	var retry *schema.Result
	var deadErr error

	l.mu.Lock()
	c.busy = false
	c.shard.inflight--
	l.inflight--
	for _, it := range batch {
		it.sending = false
	}
	switch {
	case out.OK():
		done = batch
	case out.RateLimited:
		if tm != nil {
			tm.RateLimited.Inc()
		}
		// The sender blocked the destination; kick below parks the conversation until then.
	case out.Permanent:
		done, deadErr = batch, out.Err
	default:
		for _, it := range batch {
			it.attempts++
		}
		if head.attempts >= l.cfg.MaxAttempts {
			done, deadErr = batch, out.Err
		} else {
			if tm != nil {
				tm.Retries.Inc()
			}
			retry = l.result(head, schema.StatusRetrying, out, now)
			l.wait(c, l.backoff(head.attempts))
		}
	}
	var acks []jetstream.Msg
	for _, it := range done {
		acks = append(acks, l.forget(it)...)
	}
	l.inflightG.Set(float64(l.inflight))
	l.queuedG.Set(float64(l.held))
	var back []jetstream.Msg
	if s := c.shard; !s.owned && !s.handing {
		// Handed over while this was in flight: what is left goes back to the next owner.
		back = l.takeBack(s, slices.Clone(c.items))
	}
	l.kick(c)
	if c.shard.handing {
		// Sending a batch's job may have started another batch: its conversations go on too.
		for other := range c.shard.convs {
			l.kick(other)
		}
	}
	l.pump()
	l.dropIfIdle(c)
	c.shard.settled()
	l.mu.Unlock()
	giveBack(back)

	switch {
	case deadErr != nil:
		l.publishDead(done, deadErr, tm, acks)
	case done != nil:
		results := make([]*schema.Result, len(done))
		for i, it := range done {
			r := l.result(it, schema.StatusDelivered, out, now)
			if len(done) > 1 {
				r.Merged = len(done)
			}
			results[i] = r
			if tm != nil {
				tm.Delivered.Inc()
				tm.Age.Observe(now.Sub(it.job.CreatedAt).Seconds())
			}
		}
		if tm != nil && len(done) > 1 {
			tm.Merged.Add(float64(len(done) - 1))
		}
		l.env.Out.Publish(results, nil, acks)
	case retry != nil:
		l.env.Out.Publish([]*schema.Result{retry}, nil, nil)
	}
}

// forget drops a finished item and returns the messages to ack now (see Shard.done). Lock held.
func (l *Lane) forget(it *item) []jetstream.Msg {
	if it.finished {
		return nil
	}
	it.finished = true
	if c := it.c; c != nil {
		if i := slices.Index(c.items, it); i >= 0 {
			c.items = slices.Delete(c.items, i, i+1)
			l.held--
		}
	}
	return it.d.shard.done(it.d)
}

// dropIfIdle forgets an empty, idle conversation. Lock held.
func (l *Lane) dropIfIdle(c *conv) {
	if len(c.items) == 0 && !c.busy && !c.waiting && !c.inReady {
		if l.convs[c.key] == c {
			delete(l.convs, c.key)
		}
		delete(c.shard.convs, c)
	}
}

func (l *Lane) result(it *item, status string, out deliver.Outcome, now time.Time) *schema.Result {
	r := &schema.Result{
		JobID: it.job.ID, Target: it.job.Target, SiteID: it.job.SiteID, ConversationID: it.job.ConversationID,
		MessageID: it.job.MessageID, Status: status, Attempts: it.attempts + 1, At: now,
		ExternalID: out.ExternalID, ThreadID: out.ThreadID,
	}
	if status == schema.StatusRetrying {
		r.Attempts = it.attempts
	}
	if out.Err != nil {
		r.Error = out.Err.Error()
	}
	return r
}

// dead finishes jobs that cannot be delivered (undecodable ones, before any conversation
// holds them): to DEAD with the error, acking their messages once finished.
func (l *Lane) dead(items []*item, err error, tm *metrics.Target) {
	var acks []jetstream.Msg
	l.mu.Lock()
	for _, it := range items {
		acks = append(acks, l.forget(it)...)
	}
	for _, s := range l.shards {
		s.settled()
	}
	l.mu.Unlock()
	l.publishDead(items, err, tm, acks)
}

// publishDead moves jobs to DEAD with the last error, records dead results and acks the
// messages given (those the jobs finished).
func (l *Lane) publishDead(items []*item, err error, tm *metrics.Target, acks []jetstream.Msg) {
	now := time.Now()
	var deadMsgs []*nats.Msg
	var results []*schema.Result
	for _, it := range items {
		d := nats.NewMsg(schema.DeadSubject(l.cfg.Lane, it.job.SiteID, it.job.ConversationID))
		d.Data = it.data
		d.Header.Set(schema.HeaderError, oneLine(err.Error()))
		d.Header.Set(schema.HeaderAttempts, strconv.Itoa(max(it.attempts, 1)))
		d.Header.Set(schema.HeaderTarget, it.job.Target)
		d.Header.Set(jetstream.MsgIDHeader, it.job.ID+".dead."+strconv.FormatUint(it.d.seq, 10))
		deadMsgs = append(deadMsgs, d)
		if it.job.ID != "" {
			r := l.result(it, schema.StatusDead, deliver.Outcome{Err: err}, now)
			r.Attempts = max(it.attempts, 1)
			results = append(results, r)
		}
		if tm != nil {
			tm.Dead.Inc()
		}
	}
	l.env.Log.Warn("job dead", "lane", l.cfg.Lane, "job", items[0].job.ID, "n", len(items), "err", err)
	l.env.Out.Publish(results, deadMsgs, acks)
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	if len(b) > 512 {
		b = b[:512]
	}
	return string(b)
}

// backoff is exponential with ±20 % jitter, capped.
func (l *Lane) backoff(attempts int) time.Duration {
	d := l.cfg.RetryBase
	for i := 1; i < attempts && d < l.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, l.cfg.RetryMax)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Idle reports whether the lane holds no job (tests, shutdown).
func (l *Lane) Idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held == 0 && l.inflight == 0
}
