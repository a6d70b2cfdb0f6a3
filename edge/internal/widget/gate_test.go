package widget

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		p     func() *Pacer
		at    []time.Duration // when each socket arrives, after t0
		waits []time.Duration // its wait; -1: refused
	}{
		{"burst passes at once", func() *Pacer { return &Pacer{Rate: 1000, Burst: 3} }, []time.Duration{0, 0, 0}, []time.Duration{0, 0, 0}},
		{"past the burst, one a millisecond", func() *Pacer { return &Pacer{Rate: 1000, Burst: 2} }, []time.Duration{0, 0, 0, 0, 0}, []time.Duration{0, 0, ms, 2 * ms, 3 * ms}},
		{"idle time refills the burst, no more", func() *Pacer { return &Pacer{Rate: 1000, Burst: 2} }, []time.Duration{0, 0, 0, 100 * ms, 100 * ms, 100 * ms}, []time.Duration{0, 0, ms, 0, 0, ms}},
		{"a wait past MaxWait is refused and books nothing", func() *Pacer { return &Pacer{Rate: 100, Burst: 1, MaxWait: 25 * ms} }, []time.Duration{0, 0, 0, 0, 0}, []time.Duration{0, 10 * ms, 20 * ms, -1, -1}},
		{"rate 0 never waits", func() *Pacer { return &Pacer{} }, []time.Duration{0, 0, 0}, []time.Duration{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p()
			for i, at := range tc.at {
				wait, ok := p.Reserve(t0.Add(at))
				if tc.waits[i] < 0 {
					if ok {
						t.Fatalf("socket %d: waits %s, want refused", i, wait)
					}
					continue
				}
				if !ok || wait != tc.waits[i] {
					t.Fatalf("socket %d: waits %s (ok %v), want %s", i, wait, ok, tc.waits[i])
				}
			}
		})
	}
}
