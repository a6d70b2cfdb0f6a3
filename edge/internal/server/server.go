// Package server wires the edge together: the store (only writer), embedded NATS, the job
// publisher, the results recorder, the in-process worker, and the HTTP/websocket routes.
package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/valyala/fasthttp"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/assets"
	"spookat/edge/internal/brakes"
	"spookat/edge/internal/broker"
	"spookat/edge/internal/clientip"
	"spookat/edge/internal/files"
	"spookat/edge/internal/frames"
	"spookat/edge/internal/inbox"
	"spookat/edge/internal/live"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/outbox"
	"spookat/edge/internal/presence"
	"spookat/edge/internal/results"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/slackevents"
	"spookat/edge/internal/sockets"
	"spookat/edge/internal/store"
	"spookat/edge/internal/widget"
	"spookat/schema"
	"spookat/schema/natsauth"
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
	WALPages     int // the WAL's size in pages past which the writer checkpoints it (0: 4,096)
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
	// OpeningPerAddr caps the connections one client address holds before their first answer
	// (trusted proxies are not capped); 0: 32, -1: no cap.
	OpeningPerAddr int
	// MetricsAddr serves /metrics on a listener of its own ("": off).
	MetricsAddr string
	// SnoozeTick is how often conversations whose snooze has ended are reopened (0: 10 s).
	SnoozeTick time.Duration
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

	// FileQuota bounds the attachments a site holds on disk, in bytes (0: widget.DefaultFileQuota).
	FileQuota int64
	// DiskReserve is what attachments leave free on their disk (0: widget.DefaultDiskReserve).
	DiskReserve int64
}

// DefaultRequestTimeout is Config.RequestTimeout's default: seconds, not minutes, so that
// silent connections never hold the socket budget for long.
const DefaultRequestTimeout = 10 * time.Second

// UploadTimeout bounds the reading of an attachment's request (up to 100 MB on a slow phone).
const UploadTimeout = 2 * time.Minute

// DefaultStopTimeout bounds a graceful stop when Config.StopTimeout is 0.
const DefaultStopTimeout = 10 * time.Second

// Run serves until ctx is done, then stops gracefully under one deadline (see stages):
// stop accepting, commit what is queued, publish what is pending, let the in-process worker
// finish, persist the watermark.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	stopTimeout := cfg.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = DefaultStopTimeout
	}
	sg := &stages{log: log}
	defer sg.stopAll(stopTimeout) // on a failed start too: what started stops

	lock, ok, err := admin.Lock(cfg.DataDir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("another edge is running on %s (it holds %s)", cfg.DataDir, admin.LockName)
	}
	sg.add("data directory lock", nil, func(context.Context) error { return lock.Close() })

	m := metrics.New()
	// Up from the start: a slow start (NATS settling) is visible in the metrics.
	metricsLn, err := listenMetrics(cfg.MetricsAddr, m)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		sg.add("metrics listener", nil, func(ctx context.Context) error { return metricsLn.Shutdown(ctx) })
	}
	signer, err := files.OpenSigner(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("attachment links' key: %w", err)
	}
	fileDir := files.Dir{Root: filepath.Join(cfg.DataDir, "files")}
	hub := live.NewHub()
	hub.Files = signer
	inboxHub := inbox.NewHub() // operator websockets, per site
	// Sites whose operators may have come or gone: open chat windows hear it (widget.RunPresence).
	presenceChanges := make(chan int64, 256)
	inboxHub.WatchChanged = func(site int64) { widget.PresenceChanged(presenceChanges, site) }
	here := &presence.Tracker{Watching: inboxHub.Watching, Came: func(site int64) { widget.PresenceChanged(presenceChanges, site) }}
	// The job publisher hears commits from the store's start and publishes once NATS is up
	// and the sites are read.
	var reg *sites.Registry
	pub := outbox.New(outbox.Config{
		Targets: func(id int64) *schema.SiteDelivery {
			if s := reg.ByID(id); s != nil {
				return s.Delivery
			}
			return nil
		},
		InboxURL:    func(conv int64) string { return cfg.PublicURL + "/app/#/conversations/" + strconv.FormatInt(conv, 10) },
		VisitorHere: hub.Watching,
		Files:       signer,
		PublicURL:   cfg.PublicURL,
		Log:         log,
	})
	origins := &results.Origins{} // where recent messages belong, for the results' check
	st, err := store.Open(cfg.DataDir, store.Options{
		SyncFull: cfg.SyncFull,
		MaxQueue: cfg.WriteQueue,
		WALPages: cfg.WALPages,
		// Who hears a commit, in order: the count, the visitors' and operators' sockets,
		// presence, the results' origin check, then the jobs.
		Listeners: []store.CommitListener{
			store.CommitFunc(func(c []store.Committed) { m.MessagesSaved.Add(float64(len(c))) }),
			hub, inboxHub, here, origins, pub,
		},
	})
	if err != nil {
		return err
	}
	st.SetObservers(func(n int) { m.CommitBatch.Observe(float64(n)) },
		func(d time.Duration) { m.CommitDuration.Observe(d.Seconds()) })
	m.WAL(st.WALBytes, func() (int64, int64, time.Duration) {
		w := st.WALStats()
		return w.Checkpoints, w.Partial, w.Stalled
	})
	// Closing persists the publisher's watermark: it runs whatever time is left.
	sg.add("store", nil, func(context.Context) error { return st.Close() })

	auth, err := natsauth.Open(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("NATS credentials in %s: %w", cfg.DataDir, err)
	}
	br, err := broker.Start(ctx, broker.Options{
		Listen: cfg.NATSListen, Monitor: cfg.NATSMonitor, URL: cfg.NATSURL, DataDir: cfg.DataDir,
		Replicas: cfg.Replicas, Auth: auth, Creds: cfg.NATSCreds, TLS: cfg.NATSTLS, Insecure: cfg.NATSInsecure, Log: log,
		Limits: cfg.StreamLimits, Refused: func(reason string) { m.NATSRefused.WithLabelValues(reason).Inc() },
	})
	if err != nil {
		return err
	}
	sg.add("NATS", nil, func(context.Context) error { br.Close(); return nil })
	js, err := jetstream.New(br.NC)
	if err != nil {
		return err
	}
	wcfg := worker.DefaultConfig()
	if cfg.Worker != nil {
		wcfg = *cfg.Worker
	}
	if err := broker.Settle(ctx, log, "create job consumers and worker buckets", func(ctx context.Context) error {
		return worker.Provision(ctx, js, max(cfg.Replicas, 1), wcfg)
	}); err != nil {
		return err
	}
	// The job consumers and the WORKERS bucket are kept in memory: an external NATS that
	// restarts comes back without them (and one restarted on an empty store without streams),
	// and so does an embedded JetStream restarted after a full disk (broker.WatchStore). Both
	// provision again; all of it is create-or-update.
	provision := func(why string) {
		pctx, cancel := context.WithTimeout(context.Background(), broker.SettleTimeout)
		defer cancel()
		if err := broker.Settle(pctx, log, "provision after "+why, func(ctx context.Context) error {
			if err := schema.EnsureStreams(ctx, js, max(cfg.Replicas, 1), cfg.StreamLimits); err != nil {
				return err
			}
			return worker.Provision(ctx, js, max(cfg.Replicas, 1), wcfg)
		}); err != nil {
			log.Error("provision after "+why, "err", err)
		}
	}
	br.NC.SetReconnectHandler(func(nc *nats.Conn) {
		log.Info("NATS reconnected; provisioning streams, job consumers and buckets again", "server", nc.ConnectedUrlRedacted())
		go provision("a reconnect")
	})

	siteList, err := st.Sites(ctx)
	if err != nil {
		return err
	}
	brk := brakes.New(cfg.Brakes, brakes.Wall())
	reg = sites.New(siteList, brk)
	m.BrakeLevels(func(emit func(siteID int64, level int)) {
		for _, s := range reg.All() {
			if l := s.Brake.Level(); l > 0 {
				emit(s.ID, l)
			}
		}
	})
	kv, err := js.KeyValue(ctx, schema.BucketSites)
	if err != nil {
		return err
	}
	if err := reg.Mirror(ctx, kv, auth, log); err != nil {
		return fmt.Errorf("mirror sites to %s: %w", schema.BucketSites, err)
	}

	if err := pub.Start(br.NC, st); err != nil {
		return err
	}
	p := pub
	sg.add("publisher", nil, func(context.Context) error { p.Close(); return nil })
	// Jobs of messages committed but not confirmed by JetStream before the last stop.
	replayed, err := st.Unpublished(ctx, st.PublishedThrough(), p.Committed)
	if err != nil {
		return fmt.Errorf("replay unpublished jobs: %w", err)
	}
	p.EndReplay()
	if replayed > 0 {
		log.Info("re-publishing jobs of messages above the watermark", "messages", replayed, "watermark", st.PublishedThrough())
	}
	m.Gauge("spookat_publish_backlog", "Jobs published and not yet stored by JetStream, plus messages not yet handled.",
		func() float64 { return float64(p.Backlog()) })
	m.Gauge("spookat_jobs_published", "Jobs published to JOBS since start.", func() float64 { return float64(p.Published()) })
	m.Gauge("spookat_job_batches_published", "JOBS messages (batches of jobs) published since start.", func() float64 { return float64(p.Batches()) })
	m.Publisher(p.Refused, p.Full)

	bg, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Background work: the results recorder, stream stats, the snooze tick, the store watch, the
	// consumer guard, the brake sweeper, presence and the expiry of unsent uploads. Not signalled
	// early: the recorder keeps recording what the worker reports while it stops.
	sg.add("background work", nil, func(ctx context.Context) error { stopBG(); return waitGroup(ctx, &wg) })
	wg.Go(func() { br.WatchStreams(bg, cfg.StreamStatsEvery, m.SetStream) })
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	wg.Go(func() { wakeSnoozed(bg, st, cmp.Or(cfg.SnoozeTick, 10*time.Second), clock, log) })
	wg.Go(func() { br.WatchStore(bg, func() { provision("a JetStream restart") }) })
	wg.Go(func() {
		br.GuardConsumers(bg, js, broker.ExpectedConsumer, func(stream, name string) {
			log.Warn("removed a consumer the edge did not make (someone's credentials create consumers: see ops/RUNBOOK.md, Who may do what on NATS)",
				"stream", stream, "consumer", name)
		})
	})
	rec := &results.Recorder{Store: st, Sites: reg, Metrics: m, Log: log, OnRecorded: inboxHub.Deliveries, Origins: origins,
		OnTranscript: func(conv int64, status string) {
			hub.Signal(conv, frames.TranscriptDelivery(nil, status == schema.StatusDelivered))
		}}
	for _, reason := range results.Reasons {
		m.ResultsRejected.WithLabelValues(reason)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := rec.Run(bg, js); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("results recorder stopped", "err", err)
		}
	}()

	if cfg.InprocWorker {
		if wcfg.WorkerID == "" {
			wcfg.WorkerID = "inproc-" + nuid.Next()
		}
		wcfg.SitesKey = auth.AccountPublicKey()
		// The worker starts finishing its posts when the stop begins and must be done before
		// the edge's deadline, with time left for the stages after it.
		wcfg.StopTimeout = max(min(wcfg.StopTimeout, stopTimeout-3*time.Second), stopTimeout/2)
		id, err := auth.Issue(schema.RoleWorker, wcfg.WorkerID)
		if err != nil {
			return err
		}
		wnc, err := br.Connect("spookat-worker-inproc", id)
		if err != nil {
			return fmt.Errorf("in-process worker: %w", err)
		}
		workerCtx, stopWorker := context.WithCancel(context.Background())
		workerDone := make(chan struct{})
		go func() {
			defer close(workerDone)
			defer wnc.Close()
			if err := worker.Run(workerCtx, wnc, wcfg); err != nil {
				log.Error("in-process worker stopped", "err", err)
			}
		}()
		sg.add("in-process worker", stopWorker, func(ctx context.Context) error {
			select {
			case <-workerDone:
				return nil
			case <-ctx.Done():
				return errors.New("posts still in flight; they are sent again after the next start")
			}
		})
	}
	// After the worker in start order, so that at stop the queued commits are flushed and
	// their jobs published while the worker finishes (its wait comes after).
	sg.add("job publishing", nil, func(ctx context.Context) error {
		if !p.Drain(within(ctx, 3*time.Second)) {
			return fmt.Errorf("%d jobs still unconfirmed; they are re-published at the next start", p.Backlog())
		}
		return nil
	})
	sg.add("commits", nil, func(ctx context.Context) error { return st.Flush(ctx) })

	var draining atomic.Bool
	ips := &clientip.Resolver{Header: cfg.ProxyHeader, Trusted: cfg.TrustedProxies}
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ReadTimeout:           cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout),
		IdleTimeout:           120 * time.Second,
		BodyLimit:             1 << 20,
		// Frees a connection's 4 KiB read buffer once a request is read when nothing else is
		// buffered, so a websocket (hijacked) keeps none of it for its whole life.
		ReduceMemoryUsage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			code := fiber.StatusInternalServerError
			var fe *fiber.Error
			if errors.As(err, &fe) {
				code = fe.Code
			}
			if code == fiber.StatusRequestEntityTooLarge { // read by fasthttp before any handler
				return c.Status(code).JSON(schema.HTTPError{Code: schema.CodeTooLarge,
					Message: "The request body is larger than this endpoint takes (1 MB; an attachment, the site's limit)."})
			}
			return c.Status(code).JSON(schema.HTTPError{Code: "error", Message: err.Error()})
		},
	})
	// An attachment's request may be as large as the largest a site may take; every other
	// body stays under BodyLimit.
	app.Server().HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		if h.IsPost() && bytes.HasPrefix(h.RequestURI(), []byte(widget.UploadPath)) {
			return fasthttp.RequestConfig{MaxRequestBodySize: schema.MaxFileMaxMB<<20 + 64<<10, ReadTimeout: UploadTimeout}
		}
		return fasthttp.RequestConfig{}
	}
	// A connection's first response, its upgrade to a websocket or its close ends its setup:
	// its slot of the listener's setup bound goes to the next one.
	app.Server().ConnState = func(c net.Conn, st fasthttp.ConnState) {
		if st == fasthttp.StateIdle || st == fasthttp.StateHijacked || st == fasthttp.StateClosed {
			sockets.SetupDone(c)
		}
	}
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Get("/readyz", func(c *fiber.Ctx) error {
		switch {
		case draining.Load():
			return c.Status(fiber.StatusServiceUnavailable).SendString("stopping")
		case !br.Ready():
			return c.Status(fiber.StatusServiceUnavailable).SendString("NATS is not connected")
		case !st.Running():
			return c.Status(fiber.StatusServiceUnavailable).SendString("the SQLite writer is not running")
		}
		return c.SendString("ready")
	})
	wh := &widget.Handler{Store: st, Sites: reg, Hub: hub, Metrics: m, Brakes: brk, IPs: ips, Log: log,
		Pace: &widget.Pacer{Rate: cfg.SocketRate}, Operators: inboxHub, Online: here.Online, PresenceChanges: presenceChanges, FirstFrame: cfg.FirstFrame,
		Files: fileDir, FileQuota: cfg.FileQuota, DiskReserve: cfg.DiskReserve}
	wg.Go(func() { expireUnsentFiles(bg, st, fileDir, log) })
	warnQuotas(reg, fileDir, cmp.Or(cfg.FileQuota, widget.DefaultFileQuota), log)
	wg.Go(func() { wh.RunPresence(bg, widget.PresenceSweep) })
	wg.Go(func() { every(bg, time.Minute, func() { brk.Sweep(10 * time.Minute) }) }) // forget idle (site, IP) brake entries
	wh.Register(app)
	assets.New().KnownSites(func(key string) bool { return reg.ByKey(key) != nil }).Register(app) // widget.js, chat window, /app/, /demo
	(&inbox.Handler{Store: st, Sites: reg, Hub: inboxHub, Visitors: hub, Log: log, AllowPrivateTargets: wcfg.AllowPrivateTargets, IPs: ips, Metrics: m,
		Files: fileDir}).Register(app)
	(&files.Links{Store: st, Signer: signer, Dir: fileDir, Log: log}).Register(app)
	slackEvents := &slackevents.Handler{Store: st, Sites: reg, Log: log}
	slackEvents.Register(app)

	ln, err := listen(cfg, ips, log, m)
	if err != nil {
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- app.Listener(ln) }()
	sg.add("HTTP and websockets", func() { draining.Store(true) }, func(ctx context.Context) error {
		err := app.ShutdownWithTimeout(within(ctx, 2*time.Second))
		if !wh.CloseAll(within(ctx, 2*time.Second)) {
			log.Warn("widget sockets still finishing at stop; their last messages are published at the next start")
		}
		inboxHub.CloseAll()
		slackEvents.Wait()
		return err
	})

	adminLn, err := admin.Listen(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	adminCtx, stopAdmin := context.WithCancel(context.Background())
	sg.add("admin socket", stopAdmin, nil)
	go func() {
		if err := admin.Serve(adminCtx, adminLn, &admin.Ops{Store: st, Registry: reg, Auth: auth, NATS: br, Sessions: inboxHub}); err != nil {
			log.Error("admin socket", "err", err)
		}
	}()
	log.Info("edge serving", "addr", ln.Addr().String(), "metrics", metricsAddr(metricsLn), "max_sockets", ln.Max,
		"nats", br.ClientURL(), "embedded_nats", br.Embedded(), "worker_inproc", cfg.InprocWorker, "data", cfg.DataDir)
	if cfg.Ready != nil {
		cfg.Ready(Addrs{HTTP: ln.Addr().String(), Metrics: metricsAddr(metricsLn), NATS: br.ClientURL(), NATSMonitor: br.MonitorURL()})
	}
	sg.served = true

	select {
	case <-ctx.Done():
		return nil
	case err := <-serveErr:
		// A supervisor restarts an edge that exits non-zero; one that said nothing and
		// exited 0 would stay down. (fasthttp answers a closed listener with nil.)
		if err == nil {
			err = errors.New("its listener was closed")
		}
		return fmt.Errorf("the HTTP server on -addr %s stopped serving: %w", ln.Addr(), err)
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
