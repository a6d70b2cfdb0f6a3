package lanes

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// fakeMsg is a JOBS message as far as the ack bookkeeping sees it: its identity.
type fakeMsg struct {
	jetstream.Msg
	name string
}

// newDelivery puts a message in the shard's hands with one job per conversation given.
func newDelivery(s *Partition, seq uint64, convs ...int64) *delivery {
	d := &delivery{shard: s, msg: &fakeMsg{name: string(rune('a' + seq - 1))}, seq: seq}
	for i, c := range convs {
		d.items = append(d.items, &item{d: d, pos: pos(seq, i),
			job: schema.Job{Target: schema.TargetSlack, SiteID: 1, ConversationID: c}})
	}
	d.left = len(d.items)
	s.hold(d)
	return d
}

func names(msgs []jetstream.Msg) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.(*fakeMsg).name)
	}
	return out
}

// finishJob marks a delivery's item as sent and finished, returning what may be acked.
func finishJob(s *Partition, it *item) []string {
	s.start(it.d)
	it.finished = true
	return names(s.done(it.d))
}

// A finished batch is acked only once no earlier message in hand shares a conversation with
// it; unrelated messages are acked at once; and what waited goes with the one it waited on.
func TestAcksWaitForEarlierBatchesOfTheirConversations(t *testing.T) {
	s := &Partition{seen: map[uint64]*delivery{}}
	a := newDelivery(s, 1, 10, 20) // conversation 10's first job and 20's
	b := newDelivery(s, 2, 10)     // conversation 10's second job
	c := newDelivery(s, 3, 30)     // another conversation
	if got := finishJob(s, a.items[0]); got != nil {
		t.Fatalf("a half done: acks %v", got)
	}
	if s.partial != 1 {
		t.Fatalf("partial %d with a half done, want 1", s.partial)
	}
	if got := finishJob(s, b.items[0]); got != nil {
		t.Fatalf("b done while a (conversation 10's earlier job) is not acked: acks %v, want none yet", got)
	}
	if got := finishJob(s, c.items[0]); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("c done: acks %v, want [c]", got)
	}
	if got := finishJob(s, a.items[1]); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a done: acks %v, want [a b]", got)
	}
	if s.partial != 0 || s.unacked != 0 || len(s.seen) != 0 {
		t.Fatalf("after every ack: partial %d, unacked %d, seen %d", s.partial, s.unacked, len(s.seen))
	}
}

// Giving back a message gives back the finished ones waiting on it: acked, they would let the
// next owner post the earlier job after them.
func TestGivingBackTakesItsWaiters(t *testing.T) {
	l := &Lane{convs: map[convKey]*conv{}}
	s := &Partition{lane: l, seen: map[uint64]*delivery{}, convs: map[*conv]struct{}{}}
	a := newDelivery(s, 1, 10, 20)
	b := newDelivery(s, 2, 10)
	finishJob(s, a.items[0])
	finishJob(s, b.items[0])
	back := names(l.takeBack(s, []*item{a.items[1]}))
	if !slices.Equal(back, []string{"a", "b"}) {
		t.Fatalf("given back %v, want [a b]", back)
	}
	if len(s.seen) != 0 || s.partial != 0 {
		t.Fatalf("after giving back: seen %d, partial %d", len(s.seen), s.partial)
	}
}

// A finished message does not wait for an earlier one forever: past maxAckHold it is acked,
// and what waited on it is freed with it.
func TestAckHeldAtMostMaxAckHold(t *testing.T) {
	s := &Partition{seen: map[uint64]*delivery{}}
	a := newDelivery(s, 1, 10, 20) // 20's job stays retrying
	b := newDelivery(s, 2, 10, 30)
	c := newDelivery(s, 3, 30)
	finishJob(s, a.items[0])
	finishJob(s, b.items[0])
	finishJob(s, b.items[1])
	if got := finishJob(s, c.items[0]); got != nil {
		t.Fatalf("c acked at once (%v), want it waiting on b", got)
	}
	now := b.blockedAt
	if got := names(s.overdue(now.Add(maxAckHold / 2))); got != nil {
		t.Fatalf("acked %v before maxAckHold", got)
	}
	got := names(s.overdue(now.Add(maxAckHold + time.Millisecond)))
	slices.Sort(got)
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("overdue acked %v, want [b c]", got)
	}
	if len(a.waiters) != 0 || len(s.seen) != 1 {
		t.Fatalf("a still has waiters %d; %d in hand, want only a", len(a.waiters), len(s.seen))
	}
	if got := finishJob(s, a.items[1]); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a done: acks %v", got)
	}
}

// BenchmarkAcksManyInHand: a shard holding 2,000 batches of 50 jobs (the consumer's ack-pending
// bound after an outage, batches full) over 5,000 conversations, finished in stream order but
// for the first batch's first job, which finishes last (its conversation retrying): the
// batches that share a conversation with one in hand wait, the others are acked. An op is
// one batch.
func BenchmarkAcksManyInHand(b *testing.B) {
	const held, jobs = 2000, 50
	convs := make([]int64, jobs)
	for b.Loop() {
		b.StopTimer()
		s := &Partition{seen: map[uint64]*delivery{}}
		ds := make([]*delivery, held)
		for i := range ds {
			for k := range convs {
				convs[k] = int64((i*jobs + k*7919) % 5000)
			}
			ds[i] = newDelivery(s, uint64(i+1), convs...)
		}
		b.StartTimer()
		for i, d := range ds {
			for k, it := range d.items {
				if i > 0 || k > 0 {
					finishJob(s, it)
				}
			}
		}
		finishJob(s, ds[0].items[0])
		if len(s.seen) != 0 {
			b.Fatalf("%d still in hand", len(s.seen))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*held), "µs/batch")
}
