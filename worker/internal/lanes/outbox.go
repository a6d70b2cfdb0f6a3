package lanes

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
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
// Confirmation runs in JetStream's publish-ack callbacks: no goroutine, channel or timer per
// result (waiting on each PubAckFuture's channels cost ~10 % of the worker's CPU).
type Outbox struct {
	js  jetstream.JetStream
	log *slog.Logger

	mu      sync.Mutex
	queue   []*entry             // in publish order; the head is acked first
	pending map[*nats.Msg]*entry // published, not yet confirmed
	retries sync.WaitGroup       // republish goroutines (rare: a failed publish)
	idle    chan struct{}        // closed when the queue empties (Close waits on it)
}

type entry struct {
	msgs   []*nats.Msg
	acks   []jetstream.Msg
	left   int           // messages not yet stored
	failed bool          // a message could not be stored: leave the jobs unacked
	done   chan struct{} // a Flush marker
}

// NewOutbox publishes on its own JetStream context (its ack callbacks are the outbox's).
func NewOutbox(js jetstream.JetStream, log *slog.Logger) *Outbox {
	o := &Outbox{log: log, pending: make(map[*nats.Msg]*entry)}
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

// ResultID is the Nats-Msg-Id of a result: a delivered or dead result is one per job even when
// a redelivered job produces it twice; each retrying result is its own.
func ResultID(r *schema.Result) string {
	if r.Status == schema.StatusRetrying {
		return r.JobID + ".retry." + strconv.Itoa(r.Attempts)
	}
	return r.JobID + "." + r.Status
}

func resultMsg(lane string, r *schema.Result, msgID string) *nats.Msg {
	m := &nats.Msg{Subject: schema.ResultSubject(lane, r.SiteID, r.ConversationID),
		Data: appendResult(make([]byte, 0, 320), r), Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}}
	return m
}

// Publish sends results (and dead copies) and acks the jobs once all are stored.
func (o *Outbox) Publish(msgs []*nats.Msg, acks []jetstream.Msg) {
	e := &entry{msgs: msgs, acks: acks, left: len(msgs)}
	o.mu.Lock()
	o.queue = append(o.queue, e)
	for _, m := range msgs {
		o.pending[m] = e
	}
	if len(msgs) == 0 {
		acks, marks := o.advance()
		o.mu.Unlock()
		finish(acks, marks)
		return
	}
	o.mu.Unlock()
	for _, m := range msgs {
		if _, err := o.js.PublishMsgAsync(m); err != nil {
			o.onErr(o.js, m, err)
		}
	}
}

// onErr handles a result JetStream did not store: publish it again synchronously (off the
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
	e := o.pending[m]
	if e == nil {
		o.mu.Unlock()
		return
	}
	delete(o.pending, m)
	e.left--
	if !ok {
		e.failed = true
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
	e := &entry{done: make(chan struct{})}
	o.queue = append(o.queue, e)
	o.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
	}
}

// Close waits (bounded) for what was published to be confirmed and acked. After a lost
// connection nothing more can be confirmed: those jobs come back to their next owner.
func (o *Outbox) Close() {
	o.mu.Lock()
	var idle chan struct{}
	if len(o.queue) > 0 {
		o.idle = make(chan struct{})
		idle = o.idle
	}
	o.mu.Unlock()
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
