package inbox

import (
	"context"
	"sync"
	"time"
)

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Limiter bounds login attempts per client address and per email in fixed one-minute windows,
// so neither one address guessing many accounts nor many addresses guessing one account gets
// far. In memory: a restart forgives, which is fine at these rates.
type Limiter struct {
	PerAddr  int
	PerEmail int
	Window   time.Duration

	mu    sync.Mutex
	start time.Time
	count map[string]int
}

// NewLimiter allows 10 attempts a minute per address and 5 per email.
func NewLimiter() *Limiter {
	return &Limiter{PerAddr: 10, PerEmail: 5, Window: time.Minute, count: map[string]int{}}
}

// Take counts one attempt and returns how long to wait when it is over a limit (0: go ahead).
func (l *Limiter) Take(addr, email string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.start) >= l.Window {
		l.start, l.count = now, map[string]int{}
	}
	a, e := "a:"+addr, "e:"+email
	if l.count[a] >= l.PerAddr || l.count[e] >= l.PerEmail {
		return l.start.Add(l.Window).Sub(now)
	}
	l.count[a]++
	l.count[e]++
	return 0
}
