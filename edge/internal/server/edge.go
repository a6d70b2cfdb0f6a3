package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/brakes"
	"spookat/edge/internal/broker"
	"spookat/edge/internal/clientip"
	"spookat/edge/internal/files"
	"spookat/edge/internal/frames"
	"spookat/edge/internal/inbound"
	"spookat/edge/internal/inbox"
	"spookat/edge/internal/jobs"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/plans"
	"spookat/edge/internal/presence"
	"spookat/edge/internal/results"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/slackevents"
	"spookat/edge/internal/sockets"
	"spookat/edge/internal/store"
	"spookat/edge/internal/visitorhub"
	"spookat/edge/internal/widget"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/worker"
)

// Edge is one edge process: its parts are its fields, opened by its stages in the order of
// the list in stages and closed in reverse.
type Edge struct {
	cfg         Config
	log         *slog.Logger
	stopTimeout time.Duration
	workerCfg   worker.Config

	// Made by New, in memory: nothing is opened before the data directory is locked.
	metrics   *metrics.Set
	visitors  *visitorhub.Hub   // visitors' chat windows, per conversation
	operators *inbox.Hub        // operators' inbox sockets, per site
	presence  *presence.Tracker // which sites have an operator around
	// presenceChanges are sites whose operators may have come or gone: open chat windows
	// hear it (widget.RunPresence).
	presenceChanges chan int64
	origins         *results.Origins // where recent messages belong, for the results' check
	brakes          *brakes.Brakes
	ips             *clientip.Resolver

	// Opened by the stages.
	lock       *os.File
	metricsSrv *http.Server
	signer     *files.Signer
	files      files.Dir
	publisher  *jobs.Publisher // hears commits from the store's start; publishes from its stage
	store      *store.Store
	auth       *natsauth.Authority
	nats       *broker.Broker
	// natsStarted: JOBS messages stored before it predate this start (MarkUncleanStart).
	natsStarted time.Time
	js          jetstream.JetStream
	sites       *sites.Registry

	background     sync.WaitGroup
	stopBackground context.CancelFunc

	stopWorker context.CancelFunc
	workerDone chan struct{}

	widget      *widget.Handler
	slackEvents *slackevents.Handler
	plans       *plans.Book // nil without -plans
	app         *fiber.App
	listener    *sockets.Listener
	draining    atomic.Bool
	serving     atomic.Bool // every stage started: /readyz may say ready (the admin socket is last)
	serveErr    chan error

	stopAdmin context.CancelFunc

	started []stage // in order of start
	served  bool    // got as far as serving: its stop is news, a failed start's is not
}

// stages is the edge's start order; stop runs every signal first, then the stops in reverse,
// under one deadline (see Stop). edge/README.md draws the same list (TestStagesAreTheReadmes).
func (e *Edge) stages() []stage {
	return []stage{
		{name: "data directory lock", start: e.lockData, stop: e.unlockData},
		// Up from the start: a slow start (NATS settling) is visible in the metrics.
		{name: "metrics listener", start: e.serveMetrics, stop: e.closeMetrics},
		// Closing the store persists the publisher's watermark: it runs whatever time is left.
		{name: "store", start: e.openStore, stop: e.closeStore},
		{name: "NATS", start: e.startNATS, stop: e.closeNATS},
		{name: "sites", start: e.loadSites},
		{name: "publisher", start: e.startPublisher, stop: e.closePublisher},
		// Not signalled early: the recorder keeps recording what the worker reports while it
		// stops.
		{name: "background work", start: e.startBackground, stop: e.waitBackground},
		// Signalled first, so that it starts finishing its posts while the others stop.
		{name: "in-process worker", start: e.startWorker, signal: e.signalWorker, stop: e.waitWorker},
		// After the worker in start order, so that at stop the queued commits are flushed and
		// their jobs published while the worker finishes (its wait comes after).
		{name: "job publishing", stop: e.drainJobs},
		{name: "commits", stop: e.flushCommits},
		{name: "HTTP and websockets", start: e.serveHTTP, signal: e.refuseHTTP, stop: e.closeHTTP},
		{name: "admin socket", start: e.serveAdmin, signal: e.closeAdmin},
	}
}

// New makes an edge from its configuration; nothing is opened before Start.
func New(cfg Config, log *slog.Logger) *Edge {
	e := &Edge{
		cfg:             cfg,
		log:             log,
		stopTimeout:     cmp.Or(cfg.StopTimeout, DefaultStopTimeout),
		workerCfg:       worker.DefaultConfig(),
		metrics:         metrics.New(),
		visitors:        visitorhub.NewHub(),
		operators:       inbox.NewHub(),
		presenceChanges: make(chan int64, 256),
		origins:         &results.Origins{},
		brakes:          brakes.New(cfg.Brakes, brakes.Wall()),
		ips:             &clientip.Resolver{Header: cfg.ProxyHeader, Trusted: cfg.TrustedProxies},
		serveErr:        make(chan error, 1),
	}
	if cfg.Worker != nil {
		e.workerCfg = *cfg.Worker
	}
	changed := func(site int64) { widget.PresenceChanged(e.presenceChanges, site) }
	e.operators.WatchChanged = changed
	e.presence = &presence.Tracker{Watching: e.operators.Watching, Came: changed}
	return e
}

// Start runs every stage's start in order. When one fails, what started stops (the failed
// stage too: its stop closes what it opened) and Start returns the failure.
func (e *Edge) Start(ctx context.Context) error {
	for _, st := range e.stages() {
		e.started = append(e.started, st)
		if st.start == nil {
			continue
		}
		if err := st.start(ctx); err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), e.stopTimeout)
			defer cancel()
			e.Stop(stopCtx)
			return err
		}
	}
	e.served = true
	e.serving.Store(true)
	e.log.Info("edge serving", "addr", e.listener.Addr().String(), "metrics", metricsAddr(e.metricsSrv), "max_sockets", e.listener.Max,
		"nats", e.nats.ClientURL(), "embedded_nats", e.nats.Embedded(), "worker_inproc", e.cfg.InprocWorker, "data", e.cfg.DataDir)
	if e.cfg.Ready != nil {
		e.cfg.Ready(e.Addrs())
	}
	return nil
}

// Addrs are the addresses a started edge listens on.
func (e *Edge) Addrs() Addrs {
	return Addrs{HTTP: e.listener.Addr().String(), Metrics: metricsAddr(e.metricsSrv), NATS: e.nats.ClientURL(), NATSMonitor: e.nats.MonitorURL()}
}

// Failed reports the HTTP server stopping on its own (its listener closed or broken).
func (e *Edge) Failed() <-chan error { return e.serveErr }

// Stop stops every started stage under ctx's deadline: every signal first, at once (a stage
// that needs long to finish, like the in-process worker with posts in flight, starts
// finishing while the others stop), then each stop in reverse order of start. A stage that
// returns after the deadline is logged; the stages after it still run, so that what must
// happen (closing the store, which persists the watermark) always does, and quickly.
func (e *Edge) Stop(ctx context.Context) {
	begin := time.Now()
	stopAll(ctx, e.started, e.log)
	e.started = nil
	if e.served {
		e.log.Info("edge stopped", "took", time.Since(begin).Round(time.Millisecond))
	}
}

func (e *Edge) lockData(context.Context) error {
	lock, ok, err := admin.Lock(e.cfg.DataDir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("another edge is running on %s (it holds %s)", e.cfg.DataDir, admin.LockName)
	}
	e.lock = lock
	return nil
}

func (e *Edge) unlockData(context.Context) error {
	if e.lock == nil {
		return nil
	}
	return e.lock.Close()
}

func (e *Edge) serveMetrics(context.Context) (err error) {
	e.metricsSrv, err = listenMetrics(e.cfg.MetricsAddr, e.metrics)
	return err
}

func (e *Edge) closeMetrics(ctx context.Context) error {
	if e.metricsSrv == nil {
		return nil
	}
	return e.metricsSrv.Shutdown(ctx)
}

// openStore opens the attachments' key and folder and the SQLite file, whose commits go, in
// this order, to the count, the visitors' and operators' sockets, presence, the results'
// origin check, then the job publisher.
func (e *Edge) openStore(context.Context) error {
	signer, err := files.OpenSigner(e.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("attachment links' key: %w", err)
	}
	e.signer = signer
	e.files = files.Dir{Root: filepath.Join(e.cfg.DataDir, "files")}
	e.visitors.Files = signer
	e.publisher = jobs.New(jobs.Config{
		Targets: e.delivery,
		InboxURL: func(conv int64) string {
			return e.cfg.PublicURL + "/app/#/conversations/" + strconv.FormatInt(conv, 10)
		},
		VisitorHere: e.visitors.Watching,
		Files:       signer,
		PublicURL:   e.cfg.PublicURL,
		SyncLag:     e.syncLag(),
		Log:         e.log,
	})
	m := e.metrics
	listeners := []store.CommitListener{
		store.CommitFunc(func(c []store.Committed) { m.MessagesSaved.Add(float64(len(c))) }),
		e.visitors, e.operators, e.presence, e.origins, e.publisher,
	}
	var counters []store.CommitListener
	if e.cfg.Plans != nil {
		e.plans = plans.NewBook(e.cfg.Plans, e.cfg.Clock)
		// It counts the month's new conversations before the acks go out: a visitor
		// admitted after an ack sees the conversation it acked.
		counters = append(counters, e.plans)
	}
	st, err := store.Open(e.cfg.DataDir, store.Options{
		SyncFull:  e.cfg.SyncFull,
		MaxQueue:  e.cfg.WriteQueue,
		WALPages:  e.cfg.WALPages,
		Listeners: listeners,
		Counters:  counters,
		Logger:    e.log,
	})
	if err != nil {
		return err
	}
	e.store = st
	if e.plans != nil {
		if err := e.plans.Load(context.Background(), st); err != nil {
			return fmt.Errorf("plans: %w", err)
		}
		e.plans.Notify = e.planNotice
	}
	if st.PreMigration != "" {
		e.log.Info("the database was copied before its migration", "copy", st.PreMigration)
	}
	st.SetObservers(func(n int) { m.CommitBatch.Observe(float64(n)) },
		func(d time.Duration) { m.CommitDuration.Observe(d.Seconds()) })
	m.WAL(st.WALBytes, func() (int64, int64, time.Duration) {
		w := st.WALStats()
		return w.Checkpoints, w.Partial, w.Stalled
	}, func() (int64, time.Duration) {
		w := st.WALStats()
		return w.TimerPasses, w.TimerBusy
	})
	m.SearchIndex(func() (int64, int64, int64, time.Duration, int64) {
		x := st.SearchIndexStats()
		return x.Passes, x.Failed, x.Rebuilds, x.Busy, x.Behind
	})
	return nil
}

func (e *Edge) closeStore(context.Context) error {
	if e.store == nil {
		return nil
	}
	return e.store.Close()
}

// syncLag is how old the job publisher's watermark must be before the store persists it: with
// -sync normal the embedded JetStream syncs every broker.LazySyncInterval, so twice that; with
// -sync full or an external NATS (whose durability is its cluster's), none.
func (e *Edge) syncLag() time.Duration {
	if e.cfg.SyncFull || e.cfg.NATSURL != "" {
		return 0
	}
	return 2 * broker.LazySyncInterval
}

// delivery is a site's targets (nil: no such site), for the publisher.
func (e *Edge) delivery(siteID int64) *schema.SiteDelivery {
	if s := e.sites.ByID(siteID); s != nil {
		return s.Delivery
	}
	return nil
}

// startNATS starts the embedded NATS or connects to a cluster, and makes the job consumers
// and the workers' buckets.
func (e *Edge) startNATS(ctx context.Context) error {
	auth, err := natsauth.Open(e.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("NATS credentials in %s: %w", e.cfg.DataDir, err)
	}
	e.auth = auth
	cfg := e.cfg
	e.natsStarted = time.Now()
	br, err := broker.Start(ctx, broker.Options{
		Listen: cfg.NATSListen, Monitor: cfg.NATSMonitor, URL: cfg.NATSURL, DataDir: cfg.DataDir,
		Replicas: cfg.Replicas, Auth: auth, Creds: cfg.NATSCreds, TLS: cfg.NATSTLS, Insecure: cfg.NATSInsecure, Log: e.log,
		Limits: cfg.StreamLimits, Refused: func(reason string) { e.metrics.NATSRefused.WithLabelValues(reason).Inc() },
		// -sync full: JetStream syncs every write before it answers, so the job publisher's
		// watermark only passes jobs a power cut keeps (bench/issue32.md has the cost).
		LazySync: !cfg.SyncFull,
	})
	if err != nil {
		return err
	}
	e.nats = br
	if e.js, err = jetstream.New(br.NC); err != nil {
		return err
	}
	if err := broker.Settle(ctx, e.log, "create job consumers and worker buckets", func(ctx context.Context) error {
		return worker.Provision(ctx, e.js, e.replicas(), e.workerCfg)
	}); err != nil {
		return err
	}
	br.NC.SetReconnectHandler(func(nc *nats.Conn) {
		e.log.Info("NATS reconnected; provisioning streams, job consumers and buckets again", "server", nc.ConnectedUrlRedacted())
		go e.provision("a reconnect")
	})
	return nil
}

func (e *Edge) closeNATS(context.Context) error {
	if e.nats != nil {
		e.nats.Close()
	}
	return nil
}

func (e *Edge) replicas() int { return max(e.cfg.Replicas, 1) }

// provision makes the streams, job consumers and the WORKERS bucket again. The consumers and
// the bucket are kept in memory: an external NATS that restarts comes back without them (and
// one restarted on an empty store without streams), and so does an embedded JetStream
// restarted after a full disk (broker.WatchStore). All of it is create-or-update.
func (e *Edge) provision(why string) {
	ctx, cancel := context.WithTimeout(context.Background(), broker.SettleTimeout)
	defer cancel()
	if err := broker.Settle(ctx, e.log, "provision after "+why, func(ctx context.Context) error {
		if err := schema.EnsureStreams(ctx, e.js, e.replicas(), e.cfg.StreamLimits); err != nil {
			return err
		}
		return worker.Provision(ctx, e.js, e.replicas(), e.workerCfg)
	}); err != nil {
		e.log.Error("provision after "+why, "err", err)
	}
}

// loadSites reads the sites into memory and mirrors them to the workers' bucket.
func (e *Edge) loadSites(ctx context.Context) error {
	list, err := e.store.Sites(ctx)
	if err != nil {
		return err
	}
	reg := sites.New(list, e.brakes)
	e.sites = reg
	if e.plans != nil {
		if err := e.capRetention(); err != nil {
			return fmt.Errorf("plans: %w", err)
		}
	}
	e.metrics.BrakeLevels(func(emit func(siteID int64, level int)) {
		for _, s := range reg.All() {
			if l := s.Brake.Level(); l > 0 {
				emit(s.ID, l)
			}
		}
	})
	kv, err := e.js.KeyValue(ctx, schema.BucketSites)
	if err != nil {
		return err
	}
	if err := reg.Mirror(ctx, kv, e.auth, e.log); err != nil {
		return fmt.Errorf("mirror sites to %s: %w", schema.BucketSites, err)
	}
	if err := e.refillThreads(ctx); err != nil {
		return fmt.Errorf("refill %s from the database: %w", schema.BucketThreads, err)
	}
	if e.store.Unclean() && e.cfg.NATSURL == "" {
		// The embedded JetStream went down with the last run: acknowledgements of jobs
		// delivered just before may be gone, and those jobs will come again. Before the
		// in-process worker starts, so that it marks them from the first.
		e.log.Warn("the last run did not stop cleanly; workers mark the jobs stored before this start as possible repeats")
		if err := reg.MarkUncleanStart(ctx, e.natsStarted); err != nil {
			return fmt.Errorf("tell workers of an unclean start: %w", err)
		}
	}
	return nil
}

// publishJob hands JOBS a job that belongs to no message (an invitation's email): a message of
// its own, deduplicated by the job's id, outside the publisher's windows and watermark (a
// crash before it is stored loses it; the owner sees it queued and invites again).
func (e *Edge) publishJob(ctx context.Context, j *schema.Job) error {
	if e.js == nil {
		return errors.New("JetStream is not connected yet")
	}
	m := nats.NewMsg(schema.JobSubject(j.Lane, j.SiteID, j.ConversationID))
	m.Data = schema.AppendJob(nil, j)
	m.Header.Set(jetstream.MsgIDHeader, j.ID)
	_, err := e.js.PublishMsg(ctx, m)
	return err
}

// refillThreads gives a JetStream without THREADS entries (a data directory restored on a new
// box, a JetStream store removed) the Slack and Discord threads the database recorded, before
// any worker starts here: replies to existing conversations then go on in their threads
// instead of opening new ones, and replies written in a Discord thread are still known as the
// site's. A bucket with entries is left alone; each entry is created only if absent (a
// worker's is newer).
func (e *Edge) refillThreads(ctx context.Context) error {
	all := e.sites.All()
	slack := slices.ContainsFunc(all, func(s *sites.Site) bool { return s.SlackToken != "" })
	discord := slices.ContainsFunc(all, func(s *sites.Site) bool { return s.DiscordWebhook != "" })
	if !slack && !discord {
		return nil // nothing posts to a chat: no thread to go on in (and no scan of every conversation)
	}
	kv, err := e.js.KeyValue(ctx, schema.BucketThreads)
	if err != nil {
		return err
	}
	status, err := kv.Status(ctx)
	if err != nil || status.Values() > 0 {
		return err
	}
	n := 0
	put := func(key, value string) error {
		if _, err := kv.Create(ctx, key, []byte(value)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		return nil
	}
	for _, target := range []string{schema.TargetSlack, schema.TargetDiscord} {
		if target == schema.TargetSlack && !slack || target == schema.TargetDiscord && !discord {
			continue
		}
		for after := int64(0); ; {
			list, err := e.store.Threads(ctx, target, after, 1000)
			if err != nil {
				return err
			}
			if len(list) == 0 {
				break
			}
			for _, t := range list {
				if err := put(schema.ThreadKey(target, t.SiteID, t.ConversationID), t.ID); err != nil {
					return err
				}
				if target == schema.TargetDiscord {
					if err := put(schema.DiscordThreadSiteKey(t.ID), strconv.FormatInt(t.SiteID, 10)); err != nil {
						return err
					}
				}
				n++
			}
			after = list[len(list)-1].ConversationID
		}
	}
	if n > 0 {
		e.log.Info("THREADS was empty: the Slack and Discord threads the database recorded are back in it", "threads", n)
	}
	return nil
}

// startPublisher starts the job publisher where the store says the last run stopped, and
// hands it the messages committed but not confirmed by JetStream before that stop.
func (e *Edge) startPublisher(ctx context.Context) error {
	p, st := e.publisher, e.store
	if err := p.Start(e.nats.NC, st); err != nil {
		return err
	}
	replayed, err := st.Unpublished(ctx, st.PublishedThrough(), p.Committed)
	if err != nil {
		return fmt.Errorf("replay unpublished jobs: %w", err)
	}
	p.EndReplay()
	if replayed > 0 {
		e.log.Info("re-publishing jobs of messages above the watermark", "messages", replayed, "watermark", st.PublishedThrough())
	}
	m := e.metrics
	m.Gauge("spookat_publish_backlog", "Jobs published and not yet stored by JetStream, plus messages not yet handled.",
		func() float64 { return float64(p.Backlog()) })
	m.Gauge("spookat_jobs_published", "Jobs published to JOBS since start.", func() float64 { return float64(p.Published()) })
	m.Gauge("spookat_job_batches_published", "JOBS messages (batches of jobs) published since start.", func() float64 { return float64(p.Batches()) })
	m.Publisher(p.Refused, p.Full)
	return nil
}

func (e *Edge) closePublisher(context.Context) error {
	e.publisher.Close() // hands its last watermark to the store
	return nil
}

// startBackground starts the edge's background work: the results and inbound recorders, stream stats, the
// snooze tick, retention, the store watch, the consumer guard, the brake sweeper, presence and
// the expiry of unsent uploads.
func (e *Edge) startBackground(context.Context) error {
	bg, stop := context.WithCancel(context.Background())
	e.stopBackground = stop
	wg, log := &e.background, e.log
	wg.Go(func() { e.nats.WatchStreams(bg, e.cfg.StreamStatsEvery, e.metrics.SetStream) })
	clock := e.cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	wg.Go(func() { wakeSnoozed(bg, e.store, cmp.Or(e.cfg.SnoozeTick, 10*time.Second), clock, log) })
	wg.Go(func() {
		purgeExpired(bg, e.store, e.files, cmp.Or(e.cfg.RetentionTick, RetentionEvery), clock, e.metrics, log)
	})
	wg.Go(func() { e.nats.WatchStore(bg, func() { e.provision("a JetStream restart") }) })
	wg.Go(func() {
		e.nats.GuardConsumers(bg, e.js, broker.ExpectedConsumer, func(stream, name string) {
			log.Warn("removed a consumer the edge did not make (someone's credentials create consumers: see ops/RUNBOOK.md, Who may do what on NATS)",
				"stream", stream, "consumer", name)
		})
	})
	rec := &results.Recorder{Store: e.store, Sites: e.sites, Metrics: e.metrics, Log: log, OnRecorded: e.operators.Deliveries, Origins: e.origins,
		OnTranscript: func(conv int64, status schema.DeliveryStatus) {
			e.visitors.Signal(conv, frames.TranscriptDelivery(nil, status == schema.StatusDelivered))
		},
		OnInvite: e.operators.InvitesChanged}
	for _, reason := range results.Reasons {
		e.metrics.ResultsRejected.WithLabelValues(reason)
	}
	wg.Go(func() {
		if err := rec.Run(bg, e.js); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("results recorder stopped", "err", err)
		}
	})
	in := &inbound.Recorder{Store: e.store, Sites: e.sites, Metrics: e.metrics, Log: log, Intake: e.intake()}
	for _, o := range inbound.Outcomes {
		e.metrics.Inbound.WithLabelValues(o)
	}
	wg.Go(func() {
		if err := in.Run(bg, e.js); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("inbound recorder stopped", "err", err)
		}
	})
	wg.Go(func() { expireUnsentFiles(bg, e.store, e.files, log) })
	if e.plans != nil {
		// A plan can change with time alone (a past-due grace ends): its retention follows.
		wg.Go(func() {
			every(bg, cmp.Or(e.cfg.RetentionTick, RetentionEvery), func() {
				if err := e.capRetention(); err != nil {
					log.Warn("plans: retention not capped; the next pass tries again", "err", err)
				}
			})
		})
	}
	wg.Go(func() { every(bg, time.Minute, func() { e.brakes.Sweep(10 * time.Minute) }) }) // forget idle (site, IP) brake entries
	wh := e.widgetHandler()
	wg.Go(func() { wh.RunPresence(bg, widget.PresenceSweep) })
	return nil
}

func (e *Edge) waitBackground(ctx context.Context) error {
	if e.stopBackground == nil {
		return nil
	}
	e.stopBackground()
	return waitGroup(ctx, &e.background)
}

// startWorker runs the delivery worker in this process (unless -worker none), on its own NATS
// connection and identity.
func (e *Edge) startWorker(context.Context) error {
	if !e.cfg.InprocWorker {
		return nil
	}
	wcfg := e.workerCfg
	if wcfg.WorkerID == "" {
		wcfg.WorkerID = "inproc-" + nuid.Next()
	}
	wcfg.SitesKey = e.auth.AccountPublicKey()
	// The worker starts finishing its posts when the stop begins and must be done before the
	// edge's deadline, with time left for the stages after it.
	wcfg.StopTimeout = max(min(wcfg.StopTimeout, e.stopTimeout-3*time.Second), e.stopTimeout/2)
	id, err := e.auth.Issue(schema.RoleWorker, wcfg.WorkerID)
	if err != nil {
		return err
	}
	wnc, err := e.nats.Connect("spookat-worker-inproc", id)
	if err != nil {
		return fmt.Errorf("in-process worker: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	e.stopWorker, e.workerDone = stop, make(chan struct{})
	go func() {
		defer close(e.workerDone)
		defer wnc.Close()
		if err := worker.Run(ctx, wnc, wcfg); err != nil {
			e.log.Error("in-process worker stopped", "err", err)
		}
	}()
	return nil
}

func (e *Edge) signalWorker() {
	if e.stopWorker != nil {
		e.stopWorker()
	}
}

func (e *Edge) waitWorker(ctx context.Context) error {
	if e.workerDone == nil {
		return nil
	}
	select {
	case <-e.workerDone:
		return nil
	case <-ctx.Done():
		return errors.New("posts still in flight; they are sent again after the next start")
	}
}

func (e *Edge) drainJobs(ctx context.Context) error {
	if !e.publisher.Drain(within(ctx, 3*time.Second)) {
		return fmt.Errorf("%d jobs still unconfirmed; they are re-published at the next start", e.publisher.Backlog())
	}
	return nil
}

func (e *Edge) flushCommits(ctx context.Context) error { return e.store.Flush(ctx) }

// serveHTTP registers the routes (routes.go) and serves them on the public listener.
func (e *Edge) serveHTTP(context.Context) error {
	e.app = e.routes()
	ln, err := listen(e.cfg, e.ips, e.log, e.metrics)
	if err != nil {
		return err
	}
	e.listener = ln
	go func() { e.serveErr <- e.app.Listener(ln) }()
	return nil
}

func (e *Edge) refuseHTTP() { e.draining.Store(true) }

func (e *Edge) closeHTTP(ctx context.Context) error {
	if e.listener == nil {
		return nil
	}
	err := e.app.ShutdownWithTimeout(within(ctx, 2*time.Second))
	if !e.widget.CloseAll(within(ctx, 2*time.Second)) {
		e.log.Warn("widget sockets still finishing at stop; their last messages are published at the next start")
	}
	e.operators.CloseAll()
	e.slackEvents.Wait()
	return err
}

// serveAdmin serves the CLI's socket in the data directory.
func (e *Edge) serveAdmin(context.Context) error {
	ln, err := admin.Listen(e.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	e.stopAdmin = stop
	ops := &admin.Ops{Store: e.store, Registry: e.sites, Auth: e.auth, NATS: e.nats, Sessions: e.operators, Files: e.files, PublishJob: e.publishJob}
	go func() {
		if err := admin.Serve(ctx, ln, ops); err != nil {
			e.log.Error("admin socket", "err", err)
		}
	}()
	return nil
}

func (e *Edge) closeAdmin() {
	if e.stopAdmin != nil {
		e.stopAdmin()
	}
}
