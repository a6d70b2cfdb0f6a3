package inbox

import (
	"context"
	"sync"
	"time"
)

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Limiter guards the password checks (login, password change) in one-minute windows:
//   - one address may try PerAddr times, whatever the accounts (one address guessing many);
//   - one address may fail PerPair times on one account, then waits (that address only);
//   - an account with SlowAfter failures from anywhere is slowed, never closed: each attempt
//     on it waits a little more, up to MaxDelay, before its password is checked, and the right
//     password still opens it. So nobody locks a real operator out by failing on purpose, and
//     many addresses guessing one account get a few tries a second at most.
//
// In memory: a restart forgives, which is fine at these rates.
type Limiter struct {
	PerAddr   int
	PerPair   int
	SlowAfter int
	MaxDelay  time.Duration
	Window    time.Duration
	Now       func() time.Time // nil: time.Now

	mu     sync.Mutex
	start  time.Time
	tries  map[string]int // attempts by address
	fails  map[string]int // failures by address and account
	misses map[string]int // failures by account
}

// NewLimiter allows 10 attempts a minute per address and 5 failures per (address, account);
// an account with 5 failures a minute is slowed by a second a failure, up to 5 s an attempt.
func NewLimiter() *Limiter {
	return &Limiter{PerAddr: 10, PerPair: 5, SlowAfter: 5, MaxDelay: 5 * time.Second, Window: time.Minute}
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// roll starts a new window when the last one is over (with l.mu held).
func (l *Limiter) roll(now time.Time) {
	if now.Sub(l.start) >= l.Window || l.tries == nil {
		l.start = now
		l.tries, l.fails, l.misses = map[string]int{}, map[string]int{}, map[string]int{}
	}
}

// Admit counts an attempt on account from addr. refuse > 0: not now, try again after it;
// else delay is how long to wait before checking the password (0 for an account nobody is
// guessing).
func (l *Limiter) Admit(addr, account string) (refuse, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.roll(now)
	if l.tries[addr] >= l.PerAddr || l.fails[addr+"\x00"+account] >= l.PerPair {
		return l.start.Add(l.Window).Sub(now), 0
	}
	l.tries[addr]++
	if over := l.misses[account] - l.SlowAfter + 1; over > 0 {
		delay = min(time.Duration(over)*time.Second, l.MaxDelay)
	}
	return 0, delay
}

// Failed records a wrong password on account from addr.
func (l *Limiter) Failed(addr, account string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roll(l.now())
	l.fails[addr+"\x00"+account]++
	l.misses[account]++
}
