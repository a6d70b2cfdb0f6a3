package lanes

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// ResultPublisher publishes results (and dead jobs) asynchronously and acknowledges a job only once
// JetStream has stored what it produced: a job is never acked with its result lost. Entries
// are confirmed in publish order, so acks of one conversation go out in order.
//
// Results are batched: what the lanes produce within batchWindow (at most batchMax results)
// goes out as one RESULTS message on results.<worker>, one JSON line per result. A message per
// result cost the worker a publish and a publish ack per delivery, and the edge a stored,
// delivered and acked message per delivery; a batch costs that once.
//
// Confirmation runs in JetStream's publish-ack callbacks: no goroutine, channel or timer per
// result (waiting on each PubAckFuture's channels was a share of the worker's CPU worth
// avoiding: bench/comments.md).
type ResultPublisher struct {
	js      jetstream.JetStream
	subject string
	log     *slog.Logger

	sending sync.Mutex // held while publishing, so messages go out in the order they were sealed

	mu      sync.Mutex
	queue   []*entry               // in publish order; the head is acked first
	pending map[*nats.Msg][]*entry // published or sealed, not yet confirmed
	open    *batch                 // results collecting for the next message
	sealed  []*nats.Msg            // to publish, in order
	failed  []*nats.Msg            // not stored: published again, in order, by one retrier
	retrier bool                   // the retrier runs
	retries sync.WaitGroup         // the retrier (rare: a failed publish)
	idle    chan struct{}          // closed when the queue empties (Close waits on it)
	closing chan struct{}          // closed by Close: the retrier gives up
	// keepAlive is how often jobs whose results wait for a failed publish are told to
	// JetStream as still in progress: a third of the consumers' ack wait.
	keepAlive time.Duration
}

const (
	// batchWindow is how long results wait for company. The edge records them in batches
	// of 100 ms anyway; a job's ack waits this much longer.
	batchWindow = 5 * time.Millisecond
	batchMax    = 256 // ~80 KB, well under NATS's 1 MB payload
)

type batch struct {
	data    []byte
	n       int
	entries []*entry
	timer   *time.Timer
}

type entry struct {
	at     time.Time // queued, or last told in progress
	acks   []jetstream.Msg
	left   int           // messages not yet stored
	failed bool          // a message could not be stored: leave the jobs unacked
	done   chan struct{} // a Flush marker
}

// NewResultPublisher publishes results on subject (schema.ResultSubject), on its own JetStream
// context (its ack callbacks are the outbox's). ackWait is the job consumers'.
func NewResultPublisher(js jetstream.JetStream, subject string, ackWait time.Duration, log *slog.Logger) *ResultPublisher {
	o := &ResultPublisher{subject: subject, log: log, pending: make(map[*nats.Msg][]*entry),
		closing: make(chan struct{}), keepAlive: max(ackWait/3, 100*time.Millisecond)}
	ojs, err := jetstream.New(js.Conn(),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { o.stored(m, true) }),
		jetstream.WithPublishAsyncErrHandler(o.onErr),
		jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		panic(err) // only invalid options fail
	}
	o.js = ojs
	go o.keepAliveLoop()
	return o
}

// keepAliveLoop tells JetStream that jobs whose results are not yet confirmed are still in
// hand, when that takes a third of the ack wait: while a cluster elects a new RESULTS leader
// (seconds), the delivered jobs would otherwise be handed out, and posted, again.
func (o *ResultPublisher) keepAliveLoop() {
	t := time.NewTicker(o.keepAlive)
	defer t.Stop()
	for {
		select {
		case <-o.closing:
			return
		case now := <-t.C:
			var acks []jetstream.Msg
			o.mu.Lock()
			for _, e := range o.queue {
				if now.Sub(e.at) >= o.keepAlive {
					e.at = now
					acks = append(acks, e.acks...)
				}
			}
			o.mu.Unlock()
			for _, a := range acks {
				_ = a.InProgress()
			}
		}
	}
}

// Publish queues results and dead copies of jobs, and acks the jobs once all are stored.
func (o *ResultPublisher) Publish(results []*schema.Result, dead []*nats.Msg, acks []jetstream.Msg) {
	e := &entry{at: time.Now(), acks: acks, left: len(dead)}
	o.mu.Lock()
	o.queue = append(o.queue, e)
	for _, m := range dead {
		o.pending[m] = []*entry{e}
		o.sealed = append(o.sealed, m)
	}
	if len(results) > 0 {
		b := o.open
		if b == nil {
			b = &batch{data: make([]byte, 0, 16<<10)}
			b.timer = time.AfterFunc(batchWindow, func() { o.sealIf(b) })
			o.open = b
		}
		for _, r := range results {
			b.data = append(appendResult(b.data, r), '\n')
		}
		b.n += len(results)
		b.entries = append(b.entries, e)
		e.left++
		if b.n >= batchMax {
			o.seal()
		}
	}
	if e.left == 0 {
		acks, marks := o.advance()
		o.mu.Unlock()
		finish(acks, marks)
		return
	}
	send := len(o.sealed) > 0
	o.mu.Unlock()
	if send {
		o.send()
	}
}

// seal turns the open batch into a message to publish. Lock held.
func (o *ResultPublisher) seal() {
	b := o.open
	if b == nil {
		return
	}
	o.open = nil
	b.timer.Stop()
	m := &nats.Msg{Subject: o.subject, Data: b.data}
	o.pending[m] = b.entries
	o.sealed = append(o.sealed, m)
}

// sealIf publishes batch b when its window ends, unless it went out already.
func (o *ResultPublisher) sealIf(b *batch) {
	o.mu.Lock()
	if o.open != b {
		o.mu.Unlock()
		return
	}
	o.seal()
	o.mu.Unlock()
	o.send()
}

// send publishes the sealed messages in order.
func (o *ResultPublisher) send() {
	o.sending.Lock()
	defer o.sending.Unlock()
	o.mu.Lock()
	msgs := o.sealed
	o.sealed = nil
	o.mu.Unlock()
	for _, m := range msgs {
		if _, err := o.js.PublishMsgAsync(m); err != nil {
			o.onErr(o.js, m, err)
		}
	}
}

// onErr handles a message JetStream did not store (its stream has no leader for a moment, a
// timeout): it joins the retrier's queue. The jobs were delivered already; posting them
// again is the worst outcome, so the retrier keeps publishing until the message is stored
// (keepAliveLoop keeps the waiting jobs in progress meanwhile).
func (o *ResultPublisher) onErr(_ jetstream.JetStream, m *nats.Msg, err error) {
	o.mu.Lock()
	if o.pending[m] == nil {
		o.mu.Unlock()
		return
	}
	if o.isClosing() { // stopping: its jobs come back to whoever owns them next
		o.mu.Unlock()
		o.stored(m, false)
		return
	}
	o.failed = append(o.failed, m)
	start := !o.retrier
	if start {
		o.retrier = true
		o.retries.Add(1)
	}
	o.mu.Unlock()
	if start {
		if !o.js.Conn().IsClosed() {
			o.log.Warn("results not stored; publishing them again until they are", "subject", m.Subject, "err", err)
		}
		go o.retry()
	}
}

// retryFor bounds the retries of one message: past it, its jobs are left to be delivered
// again (posted twice) rather than hold their partitions forever.
const retryFor = 10 * time.Minute

// retry publishes the failed messages again, in order, one at a time, until each is stored,
// retryFor passes, the connection is closed for good, or Close gives up on them (their jobs
// then come back to whoever owns them next).
func (o *ResultPublisher) retry() {
	defer o.retries.Done()
	wait := 100 * time.Millisecond
	since := time.Now()
	for attempt := 1; ; attempt++ {
		o.mu.Lock()
		if len(o.failed) == 0 {
			o.retrier = false
			o.mu.Unlock()
			return
		}
		m := o.failed[0]
		o.mu.Unlock()
		giveUp := o.js.Conn().IsClosed() || o.isClosing() || time.Since(since) > retryFor
		var err error
		if !giveUp {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = o.js.PublishMsg(ctx, m)
			cancel()
		}
		if err == nil || giveUp {
			o.mu.Lock()
			o.failed = o.failed[1:]
			o.mu.Unlock()
			switch {
			case giveUp:
				o.log.Warn("results not stored; their jobs will be delivered again", "subject", m.Subject, "attempts", attempt-1)
			case attempt > 1:
				o.log.Info("results stored after retrying", "subject", m.Subject, "attempts", attempt)
			}
			o.stored(m, err == nil && !giveUp)
			attempt, wait, since = 0, 100*time.Millisecond, time.Now()
			continue
		}
		if attempt%10 == 0 {
			o.log.Warn("results still not stored; publishing again", "subject", m.Subject, "attempts", attempt, "err", err)
		}
		select {
		case <-time.After(wait):
		case <-o.closing:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (o *ResultPublisher) isClosing() bool {
	select {
	case <-o.closing:
		return true
	default:
		return false
	}
}

// stored records the outcome of one message and acks every entry at the head of the queue
// that is complete.
func (o *ResultPublisher) stored(m *nats.Msg, ok bool) {
	o.mu.Lock()
	es := o.pending[m]
	if es == nil {
		o.mu.Unlock()
		return
	}
	delete(o.pending, m)
	for _, e := range es {
		e.left--
		if !ok {
			e.failed = true
		}
	}
	acks, marks := o.advance()
	o.mu.Unlock()
	finish(acks, marks)
}

func finish(acks []jetstream.Msg, marks []chan struct{}) {
	for _, a := range acks {
		_ = a.Ack()
	}
	for _, c := range marks {
		close(c)
	}
}

// advance pops the complete entries at the head of the queue and returns the jobs to ack and
// the Flush markers to release. Lock held.
func (o *ResultPublisher) advance() (acks []jetstream.Msg, marks []chan struct{}) {
	n := 0
	for _, h := range o.queue {
		if h.left > 0 {
			break
		}
		n++
		if h.done != nil {
			marks = append(marks, h.done)
		} else if !h.failed {
			acks = append(acks, h.acks...)
		}
	}
	o.pop(n)
	return acks, marks
}

// pop drops n entries from the head. Lock held.
func (o *ResultPublisher) pop(n int) {
	if n == 0 {
		return
	}
	clear(o.queue[:n])
	o.queue = o.queue[n:]
	if len(o.queue) == 0 {
		o.queue = o.queue[:0:0] // let a burst's backing array go
		if o.idle != nil {
			close(o.idle)
			o.idle = nil
		}
	}
}

// Flush returns once everything published before it is confirmed and acked (or ctx ends).
func (o *ResultPublisher) Flush(ctx context.Context) {
	o.mu.Lock()
	if len(o.queue) == 0 {
		o.mu.Unlock()
		return
	}
	o.seal()
	e := &entry{done: make(chan struct{})}
	o.queue = append(o.queue, e)
	o.mu.Unlock()
	o.send()
	select {
	case <-e.done:
	case <-ctx.Done():
	}
}

// Close waits (bounded) for what was published to be confirmed and acked. After a lost
// connection nothing more can be confirmed: those jobs come back to their next owner.
func (o *ResultPublisher) Close() {
	o.mu.Lock()
	o.seal()
	var idle chan struct{}
	if len(o.queue) > 0 {
		o.idle = make(chan struct{})
		idle = o.idle
	}
	o.mu.Unlock()
	o.send()
	if idle != nil && !o.js.Conn().IsClosed() {
		select {
		case <-idle:
		case <-time.After(10 * time.Second):
			o.log.Warn("outbox: results still unconfirmed at stop; their jobs will be redelivered")
		}
	}
	o.mu.Lock() // onErr starts a retrier under the lock: none starts after this
	close(o.closing)
	o.mu.Unlock()
	o.retries.Wait()
}
