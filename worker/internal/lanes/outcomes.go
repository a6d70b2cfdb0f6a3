package lanes

// Outcomes: what an attempt's result does to its jobs: delivered, retried, dead; the
// results published and the messages acked.

import (
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
	"spookat/worker/internal/deliver"
	"spookat/worker/internal/metrics"
)

// finish records an attempt's outcome and returns the first send it started, for the calling
// runner to make (see dispatch). Results are published (and jobs acked) outside the lock.
func (l *Lane) finish(c *conv, batch []*item, out deliver.Outcome, start time.Time) (task, bool) {
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
	case out.Dropped:
		done = batch
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
	l.claiming = true
	l.kick(c)
	if c.shard.handing {
		// Sending a batch's job may have started another batch: its conversations go on too.
		for other := range c.shard.convs {
			l.kick(other)
		}
	}
	l.pump()
	mine := l.claimed
	l.claiming, l.claimed = false, claim{}
	l.dropIfIdle(c)
	c.shard.settled()
	l.mu.Unlock()
	giveBack(back)

	switch {
	case out.Dropped:
		l.env.Out.Publish(nil, nil, acks) // the person was erased: no result, no copy in DEAD
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
	return mine.task, mine.taken
}

// forget drops a finished item and returns the messages to ack now (see Partition.done). Lock held.
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

func (l *Lane) result(it *item, status schema.DeliveryStatus, out deliver.Outcome, now time.Time) *schema.Result {
	r := &schema.Result{
		JobID: it.job.ID, Target: it.job.Target, SiteID: it.job.SiteID, ConversationID: it.job.ConversationID,
		MessageID: it.job.MessageID, Status: status, Attempts: it.attempts + 1, At: now,
		ExternalID: out.ExternalID, ThreadID: out.ThreadID,
	}
	if it.job.Invite != nil {
		r.InviteID = it.job.Invite.ID
	}
	if it.job.Erasure != nil {
		r.Erasure = it.job.Erasure.Ref
	}
	if it.job.Fetch != nil {
		r.Fetch = schema.FetchRef(it.job.Fetch.ID)
	}
	if it.job.Notice != nil {
		r.Notice = it.job.Notice.Ref
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
