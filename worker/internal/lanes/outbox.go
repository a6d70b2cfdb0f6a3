package lanes

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// Outbox publishes results (and dead jobs) asynchronously and acknowledges a job only once
// JetStream has stored what it produced: a job is never acked with its result lost. One
// goroutine confirms batches in publish order, so acks of one conversation go out in order
// and no goroutine is spent per job.
type Outbox struct {
	js  jetstream.JetStream
	log *slog.Logger
	ch  chan *entry
	end chan struct{}
}

type entry struct {
	msgs []*nats.Msg
	futs []jetstream.PubAckFuture
	acks []jetstream.Msg
	done chan struct{} // a Flush marker
}

// NewOutbox starts the confirming goroutine; Close stops it after the queue is drained.
func NewOutbox(js jetstream.JetStream, log *slog.Logger) *Outbox {
	o := &Outbox{js: js, log: log, ch: make(chan *entry, 16384), end: make(chan struct{})}
	go o.loop()
	return o
}

func resultMsg(lane string, r *schema.Result, msgID string) *nats.Msg {
	data, _ := json.Marshal(r)
	m := nats.NewMsg(schema.ResultSubject(lane, r.SiteID, r.ConversationID))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	return m
}

// ResultID is the Nats-Msg-Id of a result: a delivered or dead result is one per job even when
// a redelivered job produces it twice; each retrying result is its own.
func ResultID(r *schema.Result) string {
	if r.Status == schema.StatusRetrying {
		return r.JobID + ".retry." + strconv.Itoa(r.Attempts)
	}
	return r.JobID + "." + r.Status
}

// Publish sends results (and dead copies) and acks the jobs once all are stored.
func (o *Outbox) Publish(msgs []*nats.Msg, acks []jetstream.Msg) {
	e := &entry{msgs: msgs, acks: acks, futs: make([]jetstream.PubAckFuture, len(msgs))}
	for i, m := range msgs {
		f, err := o.js.PublishMsgAsync(m)
		if err != nil {
			o.log.Warn("publish result", "subject", m.Subject, "err", err)
		}
		e.futs[i] = f
	}
	o.ch <- e
}

// Flush returns once everything published before it is confirmed and acked (or ctx ends).
func (o *Outbox) Flush(ctx context.Context) {
	e := &entry{done: make(chan struct{})}
	select {
	case o.ch <- e:
	case <-ctx.Done():
		return
	}
	select {
	case <-e.done:
	case <-ctx.Done():
	}
}

// Close drains the queue and stops.
func (o *Outbox) Close() {
	close(o.ch)
	<-o.end
}

func (o *Outbox) loop() {
	defer close(o.end)
	for e := range o.ch {
		if e.done != nil {
			close(e.done)
			continue
		}
		ok := true
		for i, f := range e.futs {
			if f != nil && o.wait(f) {
				continue
			}
			if o.js.Conn().IsClosed() || !o.republish(e.msgs[i]) {
				ok = false
				break
			}
		}
		if !ok {
			// Leave the jobs unacked: JetStream redelivers them and the result is made again.
			continue
		}
		for _, m := range e.acks {
			_ = m.Ack()
		}
	}
}

// wait reports whether the result was stored; it gives up early if the connection closed.
func (o *Outbox) wait(f jetstream.PubAckFuture) bool {
	var tick *time.Ticker
	for {
		select {
		case <-f.Ok():
			return true
		case err := <-f.Err():
			if !o.js.Conn().IsClosed() {
				o.log.Warn("result not stored, publishing again", "subject", f.Msg().Subject, "err", err)
			}
			return false
		default:
		}
		if tick == nil {
			tick = time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
		}
		select {
		case <-f.Ok():
			return true
		case err := <-f.Err():
			if !o.js.Conn().IsClosed() {
				o.log.Warn("result not stored, publishing again", "subject", f.Msg().Subject, "err", err)
			}
			return false
		case <-tick.C:
			if o.js.Conn().IsClosed() {
				return false
			}
		}
	}
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
