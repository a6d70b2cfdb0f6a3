package lanes

import (
	"cmp"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// delivery is one JOBS message in a shard's hands: a single job, or a batch of a partition's
// jobs (schema.HeaderJobs). Its jobs travel through their conversations' FIFOs on their own;
// the message is acked once every one of them is delivered or dead.
//
// A batch whose jobs are partly delivered must not be given back to JetStream (a nak would
// deliver the delivered ones again), so a shard that hands over first finishes the batches it
// has started (see Partition.release), and gives back only untouched messages.
type delivery struct {
	shard    *Partition
	msg      jetstream.Msg
	seq      uint64 // stream sequence
	touched  time.Time
	items    []*item
	left     int         // items not finished
	size     int         // bytes, counted in the shard's hold
	started  bool        // an item was sent (or finished)
	gaveBack bool        // naked: items still in flight then finish without an ack
	waiters  []*delivery // finished messages whose ack waits for this one's (see done)
	// blockedBy is the earlier message this finished one waits on, since blockedAt.
	blockedBy *delivery
	blockedAt time.Time
}

// maxAckHold bounds how long a finished message waits for an earlier one's ack. Past it, it is
// acked anyway: a conversation stuck in retries (its channel down for an hour) would otherwise
// hold, through the conversations its batches share, every later ack of its partition, until
// the consumer's ack-pending limit stops the partition. The price is only after a crash, and
// only for such a wait: an earlier job may then be repeated after a later one.
const maxAckHold = 5 * time.Second

// batch reports whether the message holds more than one job.
func (d *delivery) batch() bool { return len(d.items) > 1 }

// partial reports whether the delivery is started and not finished: giving it back would
// repeat what is done.
func (d *delivery) partial() bool { return d.started && d.left > 0 && d.batch() }

// pos orders a job within its shard: stream sequence, then place in its batch.
func pos(seq uint64, index int) uint64 { return seq<<16 | uint64(index) }

// maxBatchJobs is the most jobs a batch may carry and still be ordered by pos; the edge's
// batches are bounded by bytes far below it.
const maxBatchJobs = 1 << 16

// start marks a delivery as started. Lock held.
func (s *Partition) start(d *delivery) {
	if !d.started {
		d.started = true
		if d.partial() {
			s.partial++
		}
	}
}

// done counts a finished item of d and returns the messages to ack now (d's, once all its
// jobs are finished, and those that waited on it). Lock held.
//
// A finished message is acked only when no earlier message in hand shares a conversation
// with it: a batch holding a conversation's earlier job may still be unfinished (its other
// jobs retrying), and acking the later one first would let a crash deliver the earlier job
// again after the later one. So what a crash repeats of a conversation is always a run at its
// end, in order.
func (s *Partition) done(d *delivery) []jetstream.Msg {
	if d.gaveBack {
		d.left--
		return nil
	}
	wasPartial := d.partial()
	d.left--
	if wasPartial && !d.partial() {
		s.partial--
	}
	if d.left > 0 {
		return nil
	}
	return s.ackable(d)
}

// ackable acks d unless an earlier message in hand shares one of its conversations (then d
// waits for that one), and then what waited on d. Lock held.
func (s *Partition) ackable(d *delivery) []jetstream.Msg {
	if b := s.blocker(d); b != nil {
		b.waiters = append(b.waiters, d)
		d.blockedBy = b
		if d.blockedAt.IsZero() {
			d.blockedAt = time.Now()
		}
		return nil
	}
	return s.ack(d)
}

// ack takes d out of hand and returns its message with those of its waiters now free.
// Lock held.
func (s *Partition) ack(d *delivery) []jetstream.Msg {
	d.blockedBy = nil
	s.letGo(d)
	out := []jetstream.Msg{d.msg}
	waiters := d.waiters
	d.waiters = nil
	for _, w := range waiters {
		out = append(out, s.ackable(w)...)
	}
	return out
}

// hold puts d in the shard's hands. Lock held.
func (s *Partition) hold(d *delivery) {
	s.seen[d.seq] = d
	s.unacked++
	s.jobs += len(d.items)
	s.bytes += d.size
	if s.byConv == nil {
		s.byConv = make(map[convKey][]*delivery)
	}
	for _, it := range d.items {
		k := keyOf(&it.job)
		if l := s.byConv[k]; len(l) == 0 || l[len(l)-1] != d { // d is last already if an earlier job of its own put it there
			s.byConv[k] = append(l, d)
		}
	}
}

// full reports whether the partition holds as many jobs, or bytes of them, as it may: its
// receive then waits (see Lane.receive). Lock held.
func (s *Partition) full() bool {
	c := &s.lane.cfg
	return (c.HoldJobs > 0 && s.jobs >= c.HoldJobs) || (c.HoldBytes > 0 && s.bytes >= c.HoldBytes)
}

// letGo takes d out of the shard's hands (acked or given back). Lock held.
func (s *Partition) letGo(d *delivery) {
	if s.seen[d.seq] != d {
		return
	}
	delete(s.seen, d.seq)
	s.unacked--
	s.jobs -= len(d.items)
	s.bytes -= d.size
	if s.waiting > 0 && !s.full() {
		s.lane.room.Broadcast()
	}
	for _, it := range d.items {
		k := keyOf(&it.job)
		l := s.byConv[k]
		if i := slices.Index(l, d); i >= 0 {
			l = slices.Delete(l, i, i+1)
		}
		if len(l) == 0 {
			delete(s.byConv, k)
		} else {
			s.byConv[k] = l
		}
	}
}

// overdue acks the finished messages that have waited maxAckHold for an earlier one. Lock
// held.
func (s *Partition) overdue(now time.Time) []jetstream.Msg {
	var out []jetstream.Msg
	for _, d := range s.seen {
		b := d.blockedBy
		if b == nil || now.Sub(d.blockedAt) < maxAckHold {
			continue
		}
		if i := slices.Index(b.waiters, d); i >= 0 {
			b.waiters = slices.Delete(b.waiters, i, i+1)
		}
		out = append(out, s.ack(d)...)
	}
	return out
}

// blocker is an earlier message in hand, not acked, with a job of one of d's conversations.
// Lock held.
func (s *Partition) blocker(d *delivery) *delivery {
	for _, it := range d.items {
		for _, x := range s.byConv[keyOf(&it.job)] {
			if x != d && x.seq < d.seq && !x.gaveBack {
				return x
			}
		}
	}
	return nil
}

// takeBack removes every unfinished item of the given items' deliveries from their
// conversations and returns those messages to give back, in stream order. Lock held.
func (l *Lane) takeBack(s *Partition, items []*item) []jetstream.Msg {
	var ds []*delivery
	for _, it := range items {
		if !slices.Contains(ds, it.d) {
			ds = append(ds, it.d)
		}
	}
	// Finished messages waiting on one given back go back too: acked, they would leave the
	// earlier job to be repeated after them.
	for i := 0; i < len(ds); i++ {
		for _, w := range ds[i].waiters {
			if !slices.Contains(ds, w) {
				ds = append(ds, w)
			}
		}
		ds[i].waiters = nil
	}
	slices.SortFunc(ds, func(a, b *delivery) int { return cmp.Compare(a.seq, b.seq) })
	msgs := make([]jetstream.Msg, 0, len(ds))
	for _, d := range ds {
		if d.partial() {
			s.partial--
		}
		d.left = 0
		for _, it := range d.items {
			if it.sending {
				d.left++ // finishes later, without an ack
				continue
			}
			if it.finished || it.c == nil {
				continue
			}
			if i := slices.Index(it.c.items, it); i >= 0 {
				it.c.items = slices.Delete(it.c.items, i, i+1)
				l.held--
			}
			it.finished = true
			l.dropIfIdle(it.c)
		}
		d.gaveBack = true
		s.letGo(d)
		msgs = append(msgs, d.msg)
	}
	return msgs
}

// giveBack naks messages (in stream order), so the next owner gets them at once and in order.
func giveBack(msgs []jetstream.Msg) {
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// finishesBatch reports whether the conversation holds a job of a started, unfinished batch:
// while a shard hands over, only those conversations are sent. Lock held.
func (c *conv) finishesBatch() bool {
	for _, it := range c.items {
		if it.d.partial() {
			return true
		}
	}
	return false
}
