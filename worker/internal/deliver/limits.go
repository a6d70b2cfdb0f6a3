package deliver

import (
	"sync"
	"time"
)

// Limits tracks rate limits per destination (a Slack channel, a Discord webhook) so a 429 holds
// back that destination alone. After a 429 the destination counts as "limited" for a while and
// its posts are paced one per Pace, each ready conversation taking the next slot; meanwhile the
// conversation's newer messages queue up and go out merged with it.
type Limits struct {
	Pace   time.Duration // spacing of posts to a limited destination
	Linger time.Duration // how long a destination stays limited after its last 429

	mu sync.Mutex
	m  map[string]*limit
}

type limit struct {
	blockedUntil time.Time // nothing goes before this (Retry-After)
	limitedUntil time.Time // pacing applies before this
	next         time.Time // next free slot while limited
}

// NewLimits returns an empty table.
func NewLimits(pace, linger time.Duration) *Limits {
	return &Limits{Pace: pace, Linger: linger, m: make(map[string]*limit)}
}

// Wait returns how long a post to key must wait. A zero wait takes the slot: the caller must
// send now. limited reports that key is being paced.
func (l *Limits) Wait(key string, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[key]
	if s == nil {
		return 0, false
	}
	if now.After(s.limitedUntil) && now.After(s.blockedUntil) {
		delete(l.m, key) // back to normal: the table only holds limited destinations
		return 0, false
	}
	at := s.blockedUntil
	if s.next.After(at) {
		at = s.next
	}
	if at.After(now) {
		return at.Sub(now), true
	}
	s.next = now.Add(l.Pace)
	return 0, true
}

// Block records a 429: nothing goes to key for after, and it is paced for Linger afterwards.
func (l *Limits) Block(key string, now time.Time, after time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.blockUntil(key, now.Add(after))
	s.limitedUntil = s.blockedUntil.Add(l.Linger)
	if s.next.Before(s.blockedUntil) {
		s.next = s.blockedUntil
	}
}

// Exhausted records a "remaining: 0, resets after d" header (Discord): no post before the reset,
// without the pacing a real 429 brings.
func (l *Limits) Exhausted(key string, now time.Time, reset time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.blockUntil(key, now.Add(reset))
}

// blockUntil holds key back until u at least (l.mu held) and returns its state.
func (l *Limits) blockUntil(key string, u time.Time) *limit {
	s := l.m[key]
	if s == nil {
		s = &limit{}
		l.m[key] = s
	}
	if u.After(s.blockedUntil) {
		s.blockedUntil = u
	}
	return s
}
