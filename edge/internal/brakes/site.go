package brakes

import (
	"sync"
	"time"
)

const minute = int64(time.Minute)

// Site is one site's brakes: the flood brake on new conversations and the message cap.
// Its mutex is the site's own.
type Site struct {
	b  *Brakes
	mu sync.Mutex

	level       int
	windowStart int64 // start of the current minute of admissions
	admitted    int   // new conversations admitted in it
	lastStep    int64 // when the level last changed
	lastReject  int64 // last new conversation refused
	msgs        Bucket
}

// Site returns fresh brakes for one site.
func (b *Brakes) Site() *Site {
	return &Site{b: b, msgs: NewBucket(b.cfg.SiteMsgRate, b.cfg.SiteMsgBurst)}
}

// allowance is how many new conversations a minute the level lets through.
func (s *Site) allowance() int {
	n := s.b.cfg.FloodThreshold
	for range s.level {
		n /= max(s.b.cfg.FloodDivisor, 2)
	}
	return n
}

// settle moves the level for the time that passed: a level older than a minute steps up if
// the flood went on through that minute, and down after each quiet minute. Then it rolls the
// minute window.
func (s *Site) settle(now int64) {
	if s.level > 0 && s.level < s.b.cfg.FloodMaxLevel && now-s.lastStep >= minute && now-s.lastReject < minute {
		s.stepUp(now)
	}
	for s.level > 0 && now-s.lastReject >= minute && now-s.lastStep >= minute {
		s.level--
		s.lastStep = max(s.lastStep+minute, s.lastReject+minute)
		s.windowStart, s.admitted = s.lastStep, 0
	}
	if now-s.windowStart >= minute {
		s.windowStart, s.admitted = now, 0
	}
}

// AdmitConversation decides on a new conversation. Refused, it says how long until the
// next one could be admitted.
func (s *Site) AdmitConversation() (bool, time.Duration) {
	if s.b.cfg.FloodThreshold <= 0 {
		return true, 0
	}
	now := s.b.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle(now)
	if s.admitted < s.allowance() {
		s.admitted++
		return true, 0
	}
	s.lastReject = now
	// Over the threshold: the brake engages (settle steps it up each minute the flood goes on).
	if s.level == 0 {
		s.stepUp(now)
	}
	// Retry when the next one would pass at this level's pace (a minute when it admits none).
	wait := time.Minute
	if a := s.allowance(); a > 0 {
		wait = time.Minute / time.Duration(a)
	}
	return false, wait
}

func (s *Site) stepUp(now int64) {
	s.level++
	s.lastStep = now
	s.windowStart, s.admitted = now, 0
}

// AdmitMessage enforces the site's sustained message cap.
func (s *Site) AdmitMessage() (bool, time.Duration) {
	if s.b.cfg.SiteMsgRate <= 0 {
		return true, 0
	}
	now := s.b.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgs.Take(now)
}

// Level is the flood brake's level now (0: not braked).
func (s *Site) Level() int {
	now := s.b.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle(now)
	return s.level
}
