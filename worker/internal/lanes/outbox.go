package lanes

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// Outbox publishes results (and dead jobs) asynchronously and acknowledges a job only once
// JetStream has stored what it produced: a job is never acked with its result lost. Entries
// are confirmed in publish order, so acks of one conversation go out in order.
//
// Results are batched: what the lanes produce within batchWindow (at most batchMax results)
// goes out as one RESULTS message on results.<worker>, one JSON line per result. A message per
// result cost the worker a publish and a publish ack per delivery, and the edge a stored,
// delivered and acked message per delivery; a batch costs that once.
//
// Confirmation runs in JetStream's publish-ack callbacks: no goroutine, channel or timer per
// result (waiting on each PubAckFuture's channels cost ~10 % of the worker's CPU).
type Outbox struct {
	js      jetstream.JetStream
	subject string
	log     *slog.Logger

	sending sync.Mutex // held while publishing, so messages go out in the order they were sealed

	mu      sync.Mutex
	queue   []*entry               // in publish order; the head is acked first
	pending map[*nats.Msg][]*entry // published or sealed, not yet confirmed
	open    *batch                 // results collecting for the next message
	sealed  []*nats.Msg            // to publish, in order
	retries sync.WaitGroup         // republish goroutines (rare: a failed publish)
	idle    chan struct{}          // closed when the queue empties (Close waits on it)
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
	acks   []jetstream.Msg
	left   int           // messages not yet stored
	failed bool          // a message could not be stored: leave the jobs unacked
	done   chan struct{} // a Flush marker
}

// NewOutbox publishes results on subject (schema.ResultSubject), on its own JetStream
// context (its ack callbacks are the outbox's).
func NewOutbox(js jetstream.JetStream, subject string, log *slog.Logger) *Outbox {
	o := &Outbox{subject: subject, log: log, pending: make(map[*nats.Msg][]*entry)}
	ojs, err := jetstream.New(js.Conn(),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { o.stored(m, true) }),
		jetstream.WithPublishAsyncErrHandler(o.onErr),
		jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		panic(err) // only invalid options fail
	}
	o.js = ojs
	return o
}

// Publish queues results and dead copies of jobs, and acks the jobs once all are stored.
func (o *Outbox) Publish(results []*schema.Result, dead []*nats.Msg, acks []jetstream.Msg) {
	e := &entry{acks: acks, left: len(dead)}
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
func (o *Outbox) seal() {
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
func (o *Outbox) sealIf(b *batch) {
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
func (o *Outbox) send() {
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

// onErr handles a message JetStream did not store: publish it again synchronously (off the
// callback goroutine), and if that fails too, leave its jobs unacked for redelivery.
func (o *Outbox) onErr(_ jetstream.JetStream, m *nats.Msg, err error) {
	o.mu.Lock()
	if o.pending[m] == nil {
		o.mu.Unlock()
		return
	}
	o.retries.Add(1)
	o.mu.Unlock()
	go func() {
		defer o.retries.Done()
		conn := o.js.Conn()
		if !conn.IsClosed() {
			o.log.Warn("result not stored, publishing again", "subject", m.Subject, "err", err)
		}
		o.stored(m, !conn.IsClosed() && o.republish(m))
	}()
}

// stored records the outcome of one message and acks every entry at the head of the queue
// that is complete.
func (o *Outbox) stored(m *nats.Msg, ok bool) {
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
func (o *Outbox) advance() (acks []jetstream.Msg, marks []chan struct{}) {
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
func (o *Outbox) pop(n int) {
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
func (o *Outbox) Flush(ctx context.Context) {
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
func (o *Outbox) Close() {
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
	o.retries.Wait()
}

func (o *Outbox) republish(m *nats.Msg) bool {
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := o.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return false // the job stays unacked and comes back to whoever owns it next
		}
		o.log.Warn("publish result", "subject", m.Subject, "attempt", i+1, "err", err)
		time.Sleep(time.Duration(i+1) * 200 * time.Millisecond)
	}
	return false
}
