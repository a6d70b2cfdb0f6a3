package inbox

import (
	"testing"
	"time"
)

// Wrong passwords from one address close that address's door to the account, not the
// account: another address with the right password gets in (slowed while the account is
// being guessed), and the account's slowing has a ceiling.
func TestLimiterSlowsAnAccountNeverLocksIt(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewLimiter()
	l.Now = func() time.Time { return now }
	for i := range 5 {
		if refuse, _ := l.Admit("203.0.113.9", "ann@shop.test"); refuse > 0 {
			t.Fatalf("attempt %d refused", i+1)
		}
		l.Failed("203.0.113.9", "ann@shop.test")
	}
	if refuse, _ := l.Admit("203.0.113.9", "ann@shop.test"); refuse <= 0 || refuse > time.Minute {
		t.Fatalf("the guessing address's sixth attempt: refuse %s, want a wait under a minute", refuse)
	}
	refuse, delay := l.Admit("198.51.100.7", "ann@shop.test")
	if refuse > 0 || delay <= 0 || delay > l.MaxDelay {
		t.Fatalf("the operator from another address: refuse %s delay %s, want admitted after a short delay", refuse, delay)
	}
	if refuse, delay := l.Admit("203.0.113.9", "bob@shop.test"); refuse > 0 || delay > 0 {
		t.Fatalf("another account from the guessing address: refuse %s delay %s", refuse, delay)
	}
	for i := range 50 {
		l.Failed("192.0.2."+string(rune('0'+i%10)), "ann@shop.test")
	}
	if _, delay := l.Admit("198.51.100.8", "ann@shop.test"); delay != l.MaxDelay {
		t.Fatalf("after 55 failures from many addresses: delay %s, want the ceiling %s", delay, l.MaxDelay)
	}
	now = now.Add(time.Minute)
	if refuse, delay := l.Admit("203.0.113.9", "ann@shop.test"); refuse > 0 || delay > 0 {
		t.Fatalf("a minute later: refuse %s delay %s", refuse, delay)
	}
	for i := range 10 {
		if refuse, _ := l.Admit("203.0.113.50", "x"+string(rune('a'+i))+"@shop.test"); refuse > 0 {
			t.Fatalf("attempt %d on many accounts refused early", i+1)
		}
	}
	if refuse, _ := l.Admit("203.0.113.50", "zz@shop.test"); refuse <= 0 {
		t.Fatal("an address trying an eleventh account in a minute is not refused")
	}
}
