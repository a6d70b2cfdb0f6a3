// Package server is the edge: an Edge of named parts (edge.go) started and stopped in the
// order of one declared list, its HTTP routes (routes.go) and its maintenance ticks.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/broker"
	"spookat/edge/internal/files"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/plans"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/worker"
)

// Config is the edge's configuration (flags and env vars, see cmd/edge).
type Config struct {
	Addr string
	// Listener, if set, is the public listener already bound (tests; a supervisor's socket
	// activation), instead of one bound on Addr.
	Listener    net.Listener
	DataDir     string
	NATSListen  string
	NATSMonitor string
	NATSURL     string
	NATSCreds   string     // the edge's credentials for an external NATS ("": signed by its own authority)
	NATSTLS     broker.TLS // TLS of the NATS client port (see broker.TLS)
	// NATSInsecure allows an embedded NATS beyond loopback without TLS and an external NATS
	// without auth (labs).
	NATSInsecure bool
	Replicas     int // stream replicas on an external NATS cluster (1 on one box)
	SyncFull     bool
	WriteQueue   int // writes that may wait for the SQLite writer; past it, "unavailable" (0: 50,000)
	WALPages     int // the WAL's size in pages past which the writer checkpoints it (0: 16,384)
	Brakes       brakes.Config
	ProxyHeader  string // header carrying the client IP behind a trusted proxy ("": the peer)
	// TrustedProxies are the peers whose ProxyHeader is believed (none: the header is ignored).
	TrustedProxies []netip.Prefix
	// MaxSockets caps the open HTTP and websocket connections; past it a client gets 503
	// (0: the file limit less a reserve, see sockets.Budget).
	MaxSockets int
	// SocketRate paces new widget sockets, all sites together (a second; 0: unpaced; the
	// edge's flag defaults to 1,000); see widget.Pacer.
	SocketRate float64
	// RequestTimeout bounds how long a connection may stay silent before its first byte and
	// then take to send a request (an attachment's upload gets UploadTimeout); 0: 10 s.
	RequestTimeout time.Duration
	// FirstFrame is how long a widget socket may stay silent after its hello (0:
	// widget.FirstFrameTimeout).
	FirstFrame time.Duration
	// WidgetReadEach reads each widget socket on a goroutine of its own rather than on the
	// shared poller (widget.Handler.ReadEach): the tests of the path other systems take.
	WidgetReadEach bool
	// OpeningPerAddr caps the connections one client address holds before their first answer
	// (trusted proxies are not capped); 0: 32, -1: no cap.
	OpeningPerAddr int
	// MetricsAddr serves /metrics on a listener of its own ("": off).
	MetricsAddr string
	// SnoozeTick is how often conversations whose snooze has ended are reopened (0: 10 s).
	SnoozeTick time.Duration
	// RetentionTick is how often sites' retention is applied (0: RetentionEvery).
	RetentionTick time.Duration
	// Clock is the time the snooze tick compares snoozes with (nil: time.Now); tests move it.
	Clock func() time.Time
	// StopTimeout bounds a graceful stop, every stage together (0: DefaultStopTimeout).
	StopTimeout time.Duration
	PublicURL   string // how browsers and operators reach this edge (links in Slack posts)
	// Worker is the workers' configuration: the edge provisions the job consumers and
	// buckets with its queue timers and in-flight limits (nil: worker.DefaultConfig()).
	Worker *worker.Config
	// InprocWorker runs a worker with that configuration in this process, on its own NATS
	// connection and identity (false: workers run as separate processes).
	InprocWorker bool
	// Ready, if set, is called once the edge serves, with the addresses it listens on.
	Ready func(Addrs)

	// StreamLimits are the byte budgets of JOBS, RESULTS and DEAD (0s: the defaults), applied
	// at every start; StreamStatsEvery is how often their use is read for /metrics (0: 15 s).
	StreamLimits     schema.StreamLimits
	StreamStatsEvery time.Duration

	// Plans (-plans) puts limits in plans and takes Paddle's notifications; nil: no limits
	// and no billing route.
	Plans *plans.Config

	// FileQuota bounds the attachments a site holds on disk, in bytes (0: files.DefaultQuota).
	FileQuota int64
	// DiskReserve is what attachments leave free on their disk (0: files.DefaultReserve).
	DiskReserve int64
}

// DefaultRequestTimeout is Config.RequestTimeout's default: seconds, not minutes, so that
// silent connections never hold the socket budget for long.
const DefaultRequestTimeout = 10 * time.Second

// UploadTimeout bounds the reading of an attachment's request (up to 100 MB on a slow phone).
const UploadTimeout = 2 * time.Minute

// DefaultStopTimeout bounds a graceful stop when Config.StopTimeout is 0.
const DefaultStopTimeout = 10 * time.Second

// Run serves until ctx is done, then stops gracefully under one deadline (see Edge.Stop):
// stop accepting, commit what is queued, publish what is pending, let the in-process worker
// finish, persist the watermark.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	e := New(cfg, log)
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), e.stopTimeout)
		defer cancel()
		e.Stop(stopCtx)
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Failed():
		// A supervisor restarts an edge that exits non-zero; one that said nothing and
		// exited 0 would stay down. (fasthttp answers a closed listener with nil.)
		if err == nil {
			err = errors.New("its listener was closed")
		}
		return fmt.Errorf("the HTTP server on -addr %s stopped serving: %w", e.listener.Addr(), err)
	}
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expireUnsentFiles is the maintenance tick that deletes the uploads no message carried
// within store.UnsentFileTTL, rows first, then files.
func expireUnsentFiles(ctx context.Context, st *store.Store, dir files.Dir, log *slog.Logger) {
	every(ctx, 10*time.Minute, func() {
		for {
			keys, err := st.ExpireUnsentFiles(ctx, time.Now().Add(-store.UnsentFileTTL), 500)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("unsent uploads not expired yet; the next tick tries again", "err", err)
				}
				return
			}
			for _, k := range keys {
				if err := dir.Remove(k); err != nil {
					log.Warn("remove an expired upload", "err", err)
				}
			}
			if len(keys) < 500 {
				return
			}
		}
	})
}

// RetentionEvery is how often the edge applies sites' retention.
const RetentionEvery = 10 * time.Minute

// Retention's pace: each commit deletes at most PurgeChunk messages, and the next waits
// PurgePause, so the writer spends a small share of its time on a purge and visitors' commits
// never queue behind one for long (bench/issue33.md has the measured cost).
const (
	PurgeChunk = 50
	PurgePause = 100 * time.Millisecond
)

// purgeExpired is retention's maintenance tick: a pass over every conversation each tick,
// deleting what sites' retention says is gone (store.PurgeExpired), files after their rows.
func purgeExpired(ctx context.Context, st *store.Store, dir files.Dir, tick time.Duration, clock func() time.Time, m *metrics.Set, log *slog.Logger) {
	pass := func() {
		start, now := time.Now(), clock()
		var total store.Purge
		var files int
		for after := int64(0); ; {
			p, err := st.PurgeExpired(ctx, now, after, PurgeChunk)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("retention: not all expired conversations deleted; the next pass goes on", "err", err)
				}
				break
			}
			for _, k := range p.FileKeys {
				if err := dir.Remove(k); err != nil {
					log.Warn("retention: remove an attachment", "err", err)
				}
			}
			total.Conversations += p.Conversations
			total.Messages += p.Messages
			files += len(p.FileKeys)
			m.RetentionPurged.WithLabelValues("conversations").Add(float64(p.Conversations))
			m.RetentionPurged.WithLabelValues("messages").Add(float64(p.Messages))
			m.RetentionPurged.WithLabelValues("files").Add(float64(len(p.FileKeys)))
			if !p.More {
				break
			}
			after = p.Next
			select {
			case <-ctx.Done():
				return
			case <-time.After(PurgePause):
			}
		}
		m.RetentionPasses.Inc()
		if total.Conversations > 0 || total.Messages > 0 {
			log.Info("retention: deleted expired conversations", "conversations", total.Conversations, "messages", total.Messages,
				"files", files, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	every(ctx, tick, pass)
}

// every runs fn each d until ctx ends (the maintenance ticks).
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// warnQuotas says at start when the sites' attachment quotas together exceed the free disk:
// uploads then stop at the disk's reserve, before the quotas.
func warnQuotas(reg *sites.Registry, dir files.Dir, quota int64, log *slog.Logger) {
	n := int64(len(reg.All()))
	free, err := dir.Free()
	if err != nil || n*quota <= free {
		return
	}
	log.Warn("the sites' attachment quotas together exceed the free disk: uploads stop at the disk's reserve (-file-quota-mb, -disk-reserve-mb)",
		"sites", n, "quota_each", quota, "free", free)
}

// wakeSnoozed is the maintenance tick that reopens, through the writer, the conversations
// whose snooze has ended.
func wakeSnoozed(ctx context.Context, st *store.Store, tick time.Duration, clock func() time.Time, log *slog.Logger) {
	const page = 500
	every(ctx, tick, func() {
		now := clock()
		for {
			n, err := st.WakeSnoozed(ctx, now, page)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("snoozed conversations not reopened yet; the next tick tries again", "err", err)
				}
				return
			}
			if n < page {
				return
			}
		}
	})
}
