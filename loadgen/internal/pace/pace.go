// Package pace is loadgen's open-loop schedule: a fixed rate, released in batches on a tick
// so the generator wakes once per tick rather than once per message.
//
// Message i (from 0) is due at Start + i/Rate; it is released at the first tick boundary at
// or after that instant, and that boundary is its intended send time. Latency is measured
// from the intended time, so a generator or server that falls behind is charged for it
// (no coordinated omission): a late tick releases every message whose slot has passed, each
// still carrying its own slot time.
package pace

import (
	"math"
	"time"
)

// eps absorbs float rounding so i = k·perTick lands in tick k, not k+1.
const eps = 1e-9

// Schedule releases Rate messages a second from Start in batches every Tick.
type Schedule struct {
	Start time.Time
	Rate  float64 // messages per second; ≤ 0 releases nothing
	Tick  time.Duration
}

func (s Schedule) perTick() float64 { return s.Rate * s.Tick.Seconds() }

// DueBy is how many messages (indexes 0…n−1) have a slot at or before t.
func (s Schedule) DueBy(t time.Time) int64 {
	if s.Rate <= 0 || t.Before(s.Start) {
		return 0
	}
	k := int64(t.Sub(s.Start) / s.Tick)
	return int64(math.Floor(float64(k)*s.perTick()+eps)) + 1
}

// SlotTick is the index of the tick that releases message i.
func (s Schedule) SlotTick(i int64) int64 {
	if i <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(i)/s.perTick() - eps))
}

// Slot is the intended send time of message i.
func (s Schedule) Slot(i int64) time.Time {
	return s.Start.Add(time.Duration(s.SlotTick(i)) * s.Tick)
}

// Batch is what a pacer releases at once: messages From…To−1.
type Batch struct {
	From, To int64
}

// Pacer walks a schedule: each call to Next waits for the next slot with something due and
// returns the batch released there. It sleeps through empty ticks, so at low rates it wakes
// once per message and at high rates once per tick.
type Pacer struct {
	S    Schedule
	End  time.Time // nothing with a slot at or after End is released
	sent int64
	t    *time.Timer
}

// NewPacer starts walking s until end.
func NewPacer(s Schedule, end time.Time) *Pacer {
	if s.Tick <= 0 {
		s.Tick = time.Millisecond
	}
	return &Pacer{S: s, End: end}
}

// Sent is how many messages the pacer has released.
func (p *Pacer) Sent() int64 { return p.sent }

// Next blocks until the next batch is due and returns it; ok is false once the schedule has
// reached End (or done is closed).
func (p *Pacer) Next(done <-chan struct{}) (b Batch, ok bool) {
	if p.S.Rate <= 0 {
		return Batch{}, false
	}
	for {
		next := p.S.Slot(p.sent)
		if !next.Before(p.End) {
			return Batch{}, false
		}
		if wait := time.Until(next); wait > 0 {
			if p.t == nil {
				p.t = time.NewTimer(wait)
			} else {
				p.t.Reset(wait)
			}
			select {
			case <-p.t.C:
			case <-done:
				p.t.Stop()
				return Batch{}, false
			}
		}
		now := time.Now()
		if !now.Before(p.End) {
			now = p.End.Add(-1)
		}
		due := p.S.DueBy(now)
		if due <= p.sent {
			continue // the timer fired a hair early
		}
		b = Batch{From: p.sent, To: due}
		p.sent = due
		return b, true
	}
}

// Stop releases the pacer's timer.
func (p *Pacer) Stop() {
	if p.t != nil {
		p.t.Stop()
	}
}
