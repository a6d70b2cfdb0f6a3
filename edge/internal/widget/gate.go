package widget

import (
	"runtime"
	"sync"
	"time"
)

// gate bounds how many sockets are saying hello or replaying history at once. A reconnect
// storm (an edge restart, a network blip: thousands of visitors back within a second) is that
// much work at the same moment; unbounded, every one of those goroutines is runnable at once,
// and every other site's frames and acks wait behind all of them in the scheduler's queue.
// Bounded, the storm queues on the gate, parked, and takes turns with everyone else.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func (g *gate) acquire() {
	g.once.Do(func() { g.ch = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)) })
	g.ch <- struct{}{}
}

func (g *gate) release() { <-g.ch }

// Pacer spreads new sockets over time: at most Rate a second (all sites together), in bursts
// of Burst. A socket past it waits its turn, parked, up to MaxWait; past that it is refused
// with 503 busy. A storm of 10,000 reconnects then takes ten seconds at 1,000 a second
// instead of taking every core for two, and established sockets keep their pace meanwhile.
type Pacer struct {
	Rate    float64       // sockets a second (0: no pacing)
	Burst   int           // sockets at once before pacing starts (default 200)
	MaxWait time.Duration // the longest a socket waits its turn (default 5 s: below the handshake timeouts of clients, so they get an answer)

	mu   sync.Mutex
	next time.Time // when the next socket is due
}

// Reserve books the next turn and says how long to wait for it; ok is false (and nothing
// is booked) when that would be longer than MaxWait.
func (p *Pacer) Reserve(now time.Time) (wait time.Duration, ok bool) {
	if p == nil || p.Rate <= 0 {
		return 0, true
	}
	every := time.Duration(float64(time.Second) / p.Rate)
	burst := p.Burst
	if burst <= 0 {
		burst = 200
	}
	maxWait := p.MaxWait
	if maxWait <= 0 {
		maxWait = 5 * time.Second
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if earliest := now.Add(-time.Duration(burst) * every); p.next.Before(earliest) {
		p.next = earliest
	}
	due := p.next.Add(every)
	if wait = due.Sub(now); wait > maxWait {
		return wait, false
	}
	p.next = due
	return max(wait, 0), true
}
