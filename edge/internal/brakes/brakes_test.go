package brakes

import (
	"net/netip"
	"testing"
	"time"
)

type fakeClock struct{ t int64 }

func (c *fakeClock) now() int64          { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t += int64(d) }
func newFake() (*fakeClock, Clock)       { c := &fakeClock{t: 1}; return c, c.now }
func admitN(s *Site, n int) (admitted int) {
	for range n {
		if ok, _ := s.AdmitConversation(); ok {
			admitted++
		}
	}
	return admitted
}

func TestFloodBrakeStepsUpAndDown(t *testing.T) {
	clock, now := newFake()
	b := New(Defaults(), now)
	s := b.Site()
	// The seed's flood: 5 new visitors a second for 200 s.
	admitted, levels := 0, map[int]int{} // level → first second it was reached
	for sec := range 200 {
		admitted += admitN(s, 5)
		if _, seen := levels[s.Level()]; !seen {
			levels[s.Level()] = sec
		}
		clock.add(time.Second)
	}
	// Level 0 lets 60 through (12 s of flood), level 1 six more, then none.
	if admitted != 66 {
		t.Errorf("flood admitted %d of 1000, want 60 + 6", admitted)
	}
	if levels[1] != 12 || levels[2] != 72 || levels[3] != 132 {
		t.Errorf("levels reached at seconds %v, want 1@12 2@72 3@132", levels)
	}
	ok, retry := s.AdmitConversation()
	if ok || retry != time.Minute {
		t.Fatalf("at the top level: ok=%v retry=%s, want refused, retry in a minute", ok, retry)
	}
	// Quiet: one level down per quiet minute.
	clock.add(time.Minute)
	if s.Level() != 2 {
		t.Fatalf("after a quiet minute level %d, want 2", s.Level())
	}
	clock.add(2 * time.Minute)
	if s.Level() != 0 {
		t.Fatalf("after three quiet minutes level %d, want 0", s.Level())
	}
	if got := admitN(s, 60); got != 60 {
		t.Fatalf("back at level 0 admitted %d, want 60", got)
	}
	// Level 1 spaces admissions: retry after 10 s.
	if ok, retry := s.AdmitConversation(); ok || s.Level() != 1 || retry != 10*time.Second {
		t.Fatalf("61st: ok=%v level=%d retry=%s", ok, s.Level(), retry)
	}
}

func TestSiteMessageCap(t *testing.T) {
	clock, now := newFake()
	b := New(Defaults(), now)
	s := b.Site()
	n := 0
	for range 200 {
		if ok, _ := s.AdmitMessage(); ok {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("burst admitted %d, want 100", n)
	}
	ok, retry := s.AdmitMessage()
	if ok || retry <= 0 || retry > 100*time.Millisecond {
		t.Fatalf("over the cap: ok=%v retry=%s", ok, retry)
	}
	// Sustained: 10 a second.
	clock.add(time.Second)
	n = 0
	for range 50 {
		if ok, _ := s.AdmitMessage(); ok {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("after 1s admitted %d, want 10", n)
	}
	// Another site is untouched.
	if ok, _ := b.Site().AdmitMessage(); !ok {
		t.Fatal("another site was braked")
	}
}

func TestPerSiteIPBuckets(t *testing.T) {
	clock, now := newFake()
	b := New(Defaults(), now)
	nat := netip.MustParseAddr("203.0.113.7")
	other := netip.MustParseAddr("203.0.113.8")
	n := 0
	for range 40 {
		if ok, _ := b.NewConversation(1, nat); ok {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("site 1 via NAT: %d new conversations, want the burst of 10", n)
	}
	if ok, _ := b.NewConversation(2, nat); !ok {
		t.Fatal("the same NAT on another site was braked")
	}
	if ok, _ := b.NewConversation(1, other); !ok {
		t.Fatal("another address on the same site was braked")
	}
	clock.add(5 * time.Second) // 0.2/s refills one
	if ok, _ := b.NewConversation(1, nat); !ok {
		t.Fatal("no refill after 5s")
	}
	clock.add(time.Hour)
	if kept := b.Sweep(10 * time.Minute); kept != 0 {
		t.Fatalf("sweep kept %d idle entries", kept)
	}
}

func TestConnectionBucket(t *testing.T) {
	bk := NewBucket(2, 10)
	n := 0
	for i := range 30 {
		if ok, _ := bk.Take(int64(i) * int64(time.Millisecond)); ok {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("burst %d, want 10", n)
	}
	free := NewBucket(0, 0)
	if ok, _ := free.Take(1); !ok {
		t.Fatal("rate 0 must mean no limit")
	}
}

func BenchmarkHotPath(b *testing.B) {
	br := New(Config{ConnMsgRate: 1e9, ConnMsgBurst: 1e9, SiteMsgRate: 1e9, SiteMsgBurst: 1e9}, Wall())
	s := br.Site()
	conn := NewBucket(1e9, 1e9)
	b.ReportAllocs()
	for b.Loop() {
		conn.Take(br.Now())
		s.AdmitMessage()
	}
}
