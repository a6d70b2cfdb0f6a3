package stairs

import (
	"context"
	"fmt"
	"time"

	"spookat/loadgen/internal/procfs"
)

// IdleReport is what open, idle widget sockets cost the server: its resident memory and
// (from its /metrics) Go's heap and stacks in use, before the sockets and once they settled.
type IdleReport struct {
	Setup          string  `json:"setup,omitempty"`
	Sockets        int     `json:"sockets"`
	ConnectSeconds float64 `json:"connect_seconds"`
	Settle         string  `json:"settle"`
	RSSBeforeMB    float64 `json:"rss_before_mb"`
	RSSAfterMB     float64 `json:"rss_after_mb"`
	// KiBPerSocket is the RSS growth ÷ sockets.
	KiBPerSocket float64 `json:"rss_kib_per_socket"`
	// HeapKiB and StackKiB per socket are the growth of go_memstats_heap_inuse_bytes and
	// go_memstats_stack_inuse_bytes ÷ sockets (absent for a server without Go metrics).
	HeapKiB         *float64 `json:"heap_kib_per_socket,omitempty"`
	StackKiB        *float64 `json:"stack_kib_per_socket,omitempty"`
	GoroutinesAdded *float64 `json:"goroutines_per_socket,omitempty"`
	// Closed counts sockets the server closed while they idled (each is a failure: an idle
	// visitor must keep its socket).
	Closed int64 `json:"closed_by_server"`
}

// Idle opens cfg.Sockets sockets (each waits for its hello), sends nothing, waits settle and
// reports what they cost cfg.EdgePID; then it closes them.
func Idle(ctx context.Context, cfg Config, settle time.Duration) (*IdleReport, error) {
	if len(cfg.Stairs) == 0 {
		cfg.Stairs = []float64{1} // none are walked; defaults wants one
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.EdgePID <= 0 {
		return nil, fmt.Errorf("idle: the server's pid is unknown (-edge-pid)")
	}
	r := newRunner(cfg)
	r.stairs = []*stairStats{{errs: map[string]int64{}}} // where readers count closed sockets
	metricsURL := cfg.metricsURL()
	goStats := func() (heap, stack, gor float64, ok bool) {
		m, err := scrape(ctx, r.http, metricsURL)
		if err != nil || !m.Has("go_memstats_heap_inuse_bytes") {
			return 0, 0, 0, false
		}
		return m.Sum("go_memstats_heap_inuse_bytes"), m.Sum("go_memstats_stack_inuse_bytes"), m.Sum("go_goroutines"), true
	}
	rss := func() (float64, error) {
		m, err := procfs.ReadMem(cfg.EdgePID)
		return float64(m.RSS), err
	}
	rep := &IdleReport{Setup: cfg.Setup, Settle: settle.String()}
	before, err := rss()
	if err != nil {
		return nil, err
	}
	h0, s0, g0, haveGo := goStats()
	t0 := time.Now()
	if err := r.connect(ctx); err != nil {
		r.closeAll()
		return nil, err
	}
	defer r.closeAll()
	rep.Sockets = len(r.sockets)
	rep.ConnectSeconds = time.Since(t0).Seconds()
	fmt.Fprintf(cfg.Log, "loadgen: %d idle sockets open in %.1fs; settling for %v\n", rep.Sockets, rep.ConnectSeconds, settle)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settle):
	}
	after, err := rss()
	if err != nil {
		return nil, err
	}
	rep.Closed = r.closed.Load()
	n := float64(rep.Sockets)
	rep.RSSBeforeMB, rep.RSSAfterMB = before/1e6, after/1e6
	rep.KiBPerSocket = (after - before) / 1024 / n
	if h1, s1, g1, ok := goStats(); ok && haveGo {
		hk, sk, gs := (h1-h0)/1024/n, (s1-s0)/1024/n, (g1-g0)/n
		rep.HeapKiB, rep.StackKiB, rep.GoroutinesAdded = &hk, &sk, &gs
	}
	return rep, nil
}

// Line is the report in one line.
func (r *IdleReport) Line() string {
	s := fmt.Sprintf("%d idle sockets: RSS %.1f → %.1f MB, %.1f KiB a socket", r.Sockets, r.RSSBeforeMB, r.RSSAfterMB, r.KiBPerSocket)
	if r.HeapKiB != nil {
		s += fmt.Sprintf(" (Go heap %.1f KiB, stacks %.1f KiB, %.2f goroutines a socket)", *r.HeapKiB, *r.StackKiB, *r.GoroutinesAdded)
	}
	if r.Closed > 0 {
		s += fmt.Sprintf("; %d closed by the server while idle", r.Closed)
	}
	return s
}
