// Package brakes keeps one site's abuse from slowing the others.
//
//   - Per connection: a token bucket on messages (a visitor types; a script floods).
//   - Per (site, IP): buckets on new sockets and new conversations, so one abuser is slowed
//     while visitors behind the same NAT on other sites are not.
//   - Per site: a flood brake on new conversations with levels, and a sustained message cap.
//
// Every check is on state owned by one connection or one site (or one shard of (site, IP)
// keys, touched only on connect and on a visitor's first message): no lock is shared by all
// sites, and no check allocates.
package brakes

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// Config holds every threshold; zero rates mean "no limit".
type Config struct {
	ConnMsgRate  float64 // messages per second per connection
	ConnMsgBurst float64

	IPSocketRate  float64 // new sockets per second per (site, IP)
	IPSocketBurst float64
	IPConvRate    float64 // new conversations per second per (site, IP)
	IPConvBurst   float64
	IPUploadRate  float64 // attachments per second per (site, IP)
	IPUploadBurst float64

	// FloodThreshold new conversations per minute are let through at level 0; each level
	// above divides it by FloodDivisor. The level steps up when the allowance is used up,
	// again each minute the flood goes on, and steps down after a quiet minute.
	FloodThreshold int
	FloodDivisor   int
	FloodMaxLevel  int

	SiteMsgRate  float64 // sustained messages per second per site
	SiteMsgBurst float64
}

// Defaults are the seed's values.
func Defaults() Config {
	return Config{
		ConnMsgRate: 2, ConnMsgBurst: 10,
		IPSocketRate: 1, IPSocketBurst: 30,
		IPConvRate: 0.2, IPConvBurst: 10,
		IPUploadRate: 0.2, IPUploadBurst: 10,
		FloodThreshold: 60, FloodDivisor: 10, FloodMaxLevel: 3,
		SiteMsgRate: 10, SiteMsgBurst: 100,
	}
}

// Clock returns the time in nanoseconds; tests give a fake one.
type Clock func() int64

// Wall is the real clock (monotonic).
func Wall() Clock {
	start := time.Now()
	return func() int64 { return int64(time.Since(start)) + 1 }
}

// Bucket is a token bucket. The zero value with rate 0 admits everything.
type Bucket struct {
	rate, burst float64 // tokens per nanosecond, capacity
	tokens      float64
	last        int64
}

// NewBucket returns a full bucket refilling at perSecond up to burst.
func NewBucket(perSecond, burst float64) Bucket {
	return Bucket{rate: perSecond / 1e9, burst: burst, tokens: burst}
}

// Take spends one token. When none is left it returns false and the wait until one is.
func (b *Bucket) Take(now int64) (bool, time.Duration) {
	if b.rate <= 0 {
		return true, 0
	}
	if b.last != 0 {
		b.tokens = min(b.burst, b.tokens+float64(now-b.last)*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate)
}

// Brakes holds the shared per-(site, IP) state and the configuration.
type Brakes struct {
	cfg   Config
	now   Clock
	seed  maphash.Seed
	shard [64]ipShard
}

type ipKey struct {
	site int64
	ip   netip.Addr
}

type ipState struct {
	sockets, convs, uploads Bucket
	seen                    int64
}

type ipShard struct {
	mu    sync.Mutex
	state map[ipKey]*ipState
}

// New returns brakes with cfg on clock now.
func New(cfg Config, now Clock) *Brakes {
	b := &Brakes{cfg: cfg, now: now, seed: maphash.MakeSeed()}
	for i := range b.shard {
		b.shard[i].state = make(map[ipKey]*ipState)
	}
	return b
}

// Config returns the thresholds.
func (b *Brakes) Config() Config { return b.cfg }

// Now is the brakes' clock.
func (b *Brakes) Now() int64 { return b.now() }

// take spends a token of one of the buckets of (site, IP), creating them on first sight.
func (b *Brakes) take(site int64, addr netip.Addr, which func(*ipState) *Bucket) (bool, time.Duration) {
	now := b.now()
	k := ipKey{site, addr}
	sh := &b.shard[maphash.Comparable(b.seed, k)%uint64(len(b.shard))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.state[k]
	if st == nil {
		st = &ipState{
			sockets: NewBucket(b.cfg.IPSocketRate, b.cfg.IPSocketBurst),
			convs:   NewBucket(b.cfg.IPConvRate, b.cfg.IPConvBurst),
			uploads: NewBucket(b.cfg.IPUploadRate, b.cfg.IPUploadBurst),
		}
		sh.state[k] = st
	}
	st.seen = now
	return which(st).Take(now)
}

// NewSocket admits a new websocket of (site, IP).
func (b *Brakes) NewSocket(site int64, addr netip.Addr) (bool, time.Duration) {
	return b.take(site, addr, func(st *ipState) *Bucket { return &st.sockets })
}

// NewConversation admits a new conversation of (site, IP). The site's flood brake is
// checked separately (Site.AdmitConversation).
func (b *Brakes) NewConversation(site int64, addr netip.Addr) (bool, time.Duration) {
	return b.take(site, addr, func(st *ipState) *Bucket { return &st.convs })
}

// Upload admits an attachment of (site, IP). It then counts against the site's message cap
// like a message (Site.AdmitMessage).
func (b *Brakes) Upload(site int64, addr netip.Addr) (bool, time.Duration) {
	return b.take(site, addr, func(st *ipState) *Bucket { return &st.uploads })
}

// Sweep forgets (site, IP) entries idle for longer than idle; run it on a timer to bound
// memory.
func (b *Brakes) Sweep(idle time.Duration) (kept int) {
	now := b.now()
	for i := range b.shard {
		sh := &b.shard[i]
		sh.mu.Lock()
		for k, st := range sh.state {
			if now-st.seen > int64(idle) {
				delete(sh.state, k)
			}
		}
		kept += len(sh.state)
		sh.mu.Unlock()
	}
	return kept
}
