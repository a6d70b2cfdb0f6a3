package pace

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScheduleCounts(t *testing.T) {
	cases := []struct {
		rate float64
		tick time.Duration
		at   time.Duration
		want int64
	}{
		{1000, time.Millisecond, 0, 1},                      // message 0 at the start
		{1000, time.Millisecond, 999 * time.Microsecond, 1}, // still tick 0
		{1000, time.Millisecond, time.Millisecond, 2},
		{1000, time.Millisecond, time.Second, 1001},
		{20000, time.Millisecond, time.Second, 20001},
		{200, time.Millisecond, time.Second, 201},
		{200, time.Millisecond, 4 * time.Millisecond, 1}, // one every 5 ms
		{200, time.Millisecond, 5 * time.Millisecond, 2},
		{333, 10 * time.Millisecond, time.Second, 334},
		{0.5, time.Millisecond, 10 * time.Second, 6},
		{0, time.Millisecond, time.Second, 0},
		{1000, time.Millisecond, -time.Second, 0},
	}
	for _, c := range cases {
		s := Schedule{Start: t0, Rate: c.rate, Tick: c.tick}
		if got := s.DueBy(t0.Add(c.at)); got != c.want {
			t.Errorf("rate %v tick %v at %v: got %d want %d", c.rate, c.tick, c.at, got, c.want)
		}
	}
}

func TestSlotConsistentWithDueBy(t *testing.T) {
	for _, rate := range []float64{1, 7, 200, 333, 1000, 1234.5, 5000, 20000, 123456} {
		for _, tick := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 100 * time.Microsecond} {
			s := Schedule{Start: t0, Rate: rate, Tick: tick}
			for i := int64(0); i < 3000; i++ {
				slot := s.Slot(i)
				if s.DueBy(slot) <= i {
					t.Fatalf("rate %v tick %v: message %d not due at its slot %v", rate, tick, i, slot.Sub(t0))
				}
				if i > 0 && s.SlotTick(i) > 0 && s.DueBy(slot.Add(-tick)) > i {
					t.Fatalf("rate %v tick %v: message %d due a tick before its slot", rate, tick, i)
				}
				// The slot is never before the exact instant i/rate.
				exact := t0.Add(time.Duration(float64(i) / rate * 1e9))
				if slot.Before(exact.Add(-time.Microsecond)) {
					t.Fatalf("rate %v: slot %v before exact %v", rate, slot.Sub(t0), exact.Sub(t0))
				}
				if slot.Sub(exact) > tick+time.Microsecond {
					t.Fatalf("rate %v: slot %v more than a tick after %v", rate, slot.Sub(t0), exact.Sub(t0))
				}
			}
		}
	}
}

func TestPacerRealTime(t *testing.T) {
	start := time.Now()
	p := NewPacer(Schedule{Start: start, Rate: 2000, Tick: time.Millisecond}, start.Add(200*time.Millisecond))
	defer p.Stop()
	var n, batches int64
	for {
		b, ok := p.Next(nil)
		if !ok {
			break
		}
		if b.From != n || b.To <= b.From {
			t.Fatalf("batch %+v after %d", b, n)
		}
		n = b.To
		batches++
	}
	// Slots 0…199 ms hold messages 0…398 (2 per tick, message 0 at 0).
	if n != 399 {
		t.Fatalf("released %d, want 399", n)
	}
	if batches > 201 || batches < 20 {
		t.Fatalf("%d batches: the pacer should wake about once per tick", batches)
	}
	if el := time.Since(start); el < 195*time.Millisecond || el > time.Second {
		t.Fatalf("took %v", el)
	}
}

func TestPacerCatchesUpWithSlots(t *testing.T) {
	// A pacer that starts late releases the whole backlog at once; slots stay in the past.
	start := time.Now().Add(-50 * time.Millisecond)
	p := NewPacer(Schedule{Start: start, Rate: 1000, Tick: time.Millisecond}, start.Add(60*time.Millisecond))
	defer p.Stop()
	b, ok := p.Next(nil)
	if !ok || b.From != 0 || b.To < 50 {
		t.Fatalf("first batch %+v %v", b, ok)
	}
	if got := p.S.Slot(10); got != start.Add(10*time.Millisecond) {
		t.Fatalf("slot 10 = %v", got.Sub(start))
	}
	done := make(chan struct{})
	close(done)
	for {
		if _, ok := p.Next(done); !ok {
			break
		}
	}
}
