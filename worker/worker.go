// Package worker delivers jobs from the JOBS stream to Slack, Discord, signed webhooks and
// email, and publishes the outcome of each to RESULTS. It never opens the database: what it
// needs travels in the job or sits in the SITES bucket, what it learns goes back as a result.
//
// The same code runs in the edge's process (edge -worker inproc) and as bin/worker, once per
// extra core. Workers find each other in the WORKERS bucket and split each lane's partitions
// between them; see internal/lanes for how order per conversation is kept.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"

	"spookat/schema"
	"spookat/worker/egress"
	"spookat/worker/internal/deliver"
	"spookat/worker/internal/discord"
	"spookat/worker/internal/email"
	"spookat/worker/internal/gateway"
	"spookat/worker/internal/lanes"
	"spookat/worker/internal/members"
	"spookat/worker/internal/metrics"
	"spookat/worker/internal/sites"
	"spookat/worker/internal/slack"
	"spookat/worker/internal/threads"
	"spookat/worker/internal/webhook"
)

// Config of a worker. DefaultConfig gives production values; RegisterFlags exposes them.
type Config struct {
	SlackAPI   string // Slack Web API base URL
	DiscordAPI string // replaces https://discord.com/api in webhook URLs ("" keeps them)
	// DiscordGateway is the gateway the sites with a bot token are held at (gateway.DefaultURL).
	DiscordGateway string

	ChatInFlight    int
	WebhookInFlight int
	EmailInFlight   int

	MaxAttempts int           // attempts before DEAD
	RetryBase   time.Duration // first retry delay
	RetryMax    time.Duration // longest retry delay

	SlackPace  time.Duration // posts per channel while Slack rate limits it
	SlackMerge int           // most queued messages of a thread merged into one post then

	WebhookTimeout time.Duration
	ChatTimeout    time.Duration

	// H2C speaks HTTP/2 without TLS to an http:// Discord API URL (mocks that serve it, like
	// `loadgen mock`). The real API is https, where HTTP/2 is negotiated anyway. Slack is
	// always HTTP/1.1 keep-alive (see internal/slack).
	H2C bool

	// AllowPrivateTargets lets webhooks and Discord reach loopback, private, link-local and
	// metadata addresses and http:// URLs: for labs and tests whose receivers run on this host.
	// Off, both are checked at save time by the edge and at every connection by the worker
	// (package egress).
	AllowPrivateTargets bool

	SMTP email.Config

	// The queue's timers are the edge's to set (Provision): a worker reads them from the job
	// consumers and the WORKERS bucket, so every worker runs with the same.
	AckWait   time.Duration // consumer ack wait: how soon a crashed worker's jobs come back
	PinnedTTL time.Duration // how soon a crashed worker's partitions can be taken
	MemberTTL time.Duration // how soon a crashed worker is noticed (WORKERS bucket TTL)

	PullExpiry  time.Duration // an idle shard costs one pull request per expiry
	StopTimeout time.Duration // bound on finishing in-flight deliveries at stop

	WorkerID string // unique per worker; random by default
	// SitesKey is the public key the edge signs SITES values with: its account's, the issuer
	// of the worker's credentials. Values not signed with it are ignored.
	SitesKey   string
	Registerer prometheus.Registerer // nil: a registry of its own
	Logger     *slog.Logger          // nil: slog.Default()
}

// DefaultConfig is sized for throughput: an in-flight post is a goroutine waiting on a socket.
func DefaultConfig() Config {
	return Config{
		SlackAPI:        "https://slack.com/api/",
		DiscordGateway:  gateway.DefaultURL,
		ChatInFlight:    512,
		WebhookInFlight: 256,
		EmailInFlight:   16,
		MaxAttempts:     40, // 1 s doubling to 1 h, then hourly: ~29 h before DEAD
		RetryBase:       time.Second,
		RetryMax:        time.Hour,
		SlackPace:       time.Second,
		SlackMerge:      20,
		WebhookTimeout:  10 * time.Second,
		ChatTimeout:     15 * time.Second,
		SMTP:            email.Config{Port: 587, TLS: "starttls", From: "spookat@localhost"},
		AckWait:         30 * time.Second,
		PinnedTTL:       20 * time.Second,
		PullExpiry:      10 * time.Second,
		MemberTTL:       schema.DefaultWorkerTTL,
		StopTimeout:     10 * time.Second,
	}
}

// RegisterFlags adds the worker's flags to fs (the binary adds -nats-url and -metrics-addr).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.SlackAPI, "slack-api", c.SlackAPI, "Slack Web API base URL (point it at 'loadgen mock' for tests)")
	fs.StringVar(&c.DiscordAPI, "discord-api", c.DiscordAPI, "replace https://discord.com/api in Discord webhook URLs with this base (tests)")
	fs.StringVar(&c.DiscordGateway, "discord-gateway", c.DiscordGateway, "Discord gateway URL for the sites with a bot token (tests: a mock's ws:// URL)")
	fs.BoolVar(&c.H2C, "h2c", c.H2C, "HTTP/2 without TLS to an http:// -discord-api (mocks that serve it, e.g. loadgen mock); https uses HTTP/2 regardless")
	fs.BoolVar(&c.AllowPrivateTargets, "allow-private-targets", c.AllowPrivateTargets, "labs and tests only: let webhooks and Discord reach loopback, private, link-local and cloud metadata addresses, over http:// too")
	fs.IntVar(&c.ChatInFlight, "chat-inflight", c.ChatInFlight, "chat posts (Slack, Discord) in flight at once")
	fs.IntVar(&c.WebhookInFlight, "webhook-inflight", c.WebhookInFlight, "webhook posts in flight at once")
	fs.IntVar(&c.EmailInFlight, "email-inflight", c.EmailInFlight, "emails in flight at once")
	fs.IntVar(&c.MaxAttempts, "max-attempts", c.MaxAttempts, "attempts before a job goes to DEAD")
	fs.DurationVar(&c.RetryBase, "retry-base", c.RetryBase, "first retry delay (doubles per attempt, ±20% jitter)")
	fs.DurationVar(&c.RetryMax, "retry-max", c.RetryMax, "longest retry delay")
	fs.DurationVar(&c.SlackPace, "slack-pace", c.SlackPace, "spacing of posts to a Slack channel after it answered 429")
	fs.IntVar(&c.SlackMerge, "slack-merge", c.SlackMerge, "most queued messages of a thread merged into one post while its channel is limited")
	fs.DurationVar(&c.WebhookTimeout, "webhook-timeout", c.WebhookTimeout, "timeout of one webhook post")
	fs.StringVar(&c.SMTP.Host, "smtp-host", c.SMTP.Host, "SMTP relay host (empty: email jobs retry, then go to DEAD)")
	fs.IntVar(&c.SMTP.Port, "smtp-port", c.SMTP.Port, "SMTP relay port")
	fs.StringVar(&c.SMTP.User, "smtp-user", c.SMTP.User, "SMTP user (empty: no auth)")
	fs.StringVar(&c.SMTP.Password, "smtp-password", c.SMTP.Password, "SMTP password (or env SPOOKAT_SMTP_PASSWORD)")
	fs.StringVar(&c.SMTP.TLS, "smtp-tls", c.SMTP.TLS, "none | starttls (if offered) | mandatory (STARTTLS required) | tls (implicit)")
	fs.StringVar(&c.SMTP.From, "smtp-from", c.SMTP.From, "From address of notifications")
	fs.DurationVar(&c.PullExpiry, "pull-expiry", c.PullExpiry, "expiry of a partition's pull request (an idle partition costs one per expiry; kept below the edge's -pinned-ttl)")
	fs.DurationVar(&c.StopTimeout, "stop-timeout", c.StopTimeout, "how long a stop may take: a worker finishes its deliveries in flight within it; the edge fits its whole stop in it (commits, publishing, the in-process worker)")
	fs.StringVar(&c.WorkerID, "worker-id", c.WorkerID, "worker id: its key in WORKERS and its subject results.<id> in RESULTS (other characters than letters, digits, - and _ become _ there) (default: the id its -nats-creds were issued for; random in the edge's process)")
}

// RegisterQueueFlags adds the flags of what Provision creates (the edge's: workers read
// them from the server).
func (c *Config) RegisterQueueFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.AckWait, "ack-wait", c.AckWait, "JetStream ack wait of the job consumers (how soon a crashed worker's jobs come back)")
	fs.DurationVar(&c.PinnedTTL, "pinned-ttl", c.PinnedTTL, "how long a silent worker keeps its partitions pinned")
	fs.DurationVar(&c.MemberTTL, "member-ttl", c.MemberTTL, "how soon a silent worker counts as gone (the WORKERS bucket's TTL)")
}

// Check validates the configuration (and fills in what follows from it); Run calls it too.
func (c *Config) Check() error {
	if u, err := url.Parse(c.SlackAPI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-slack-api %q: want an http(s) URL such as https://slack.com/api/", c.SlackAPI)
	}
	if c.ChatInFlight < 1 || c.WebhookInFlight < 1 || c.EmailInFlight < 1 {
		return errors.New("-chat-inflight, -webhook-inflight and -email-inflight must be ≥ 1, e.g. -chat-inflight 512")
	}
	if c.MaxAttempts < 1 {
		return errors.New("-max-attempts must be ≥ 1, e.g. -max-attempts 40")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"-retry-base", c.RetryBase}, {"-retry-max", c.RetryMax}, {"-slack-pace", c.SlackPace},
		{"-webhook-timeout", c.WebhookTimeout}, {"-stop-timeout", c.StopTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: want a duration above zero, e.g. %s 10s", d.flag, d.v, d.flag)
		}
	}
	switch c.SMTP.TLS {
	case "none", "starttls", "mandatory", "tls":
	default:
		return fmt.Errorf("-smtp-tls %q: want none, starttls, mandatory or tls (e.g. -smtp-tls starttls)", c.SMTP.TLS)
	}
	if c.MemberTTL < time.Second {
		c.MemberTTL = time.Second
	}
	return c.fitPull()
}

// fitPull keeps the pull expiry below the pinned TTL: the owner must renew its pull well
// within the TTL to stay pinned. A short pinned TTL (tests, fast failover) brings the pull
// expiry down with it.
func (c *Config) fitPull() error {
	if c.PullExpiry < time.Second {
		c.PullExpiry = time.Second
	}
	if c.PinnedTTL <= c.PullExpiry && c.PinnedTTL >= 2*time.Second {
		c.PullExpiry = c.PinnedTTL / 2
	}
	if c.PinnedTTL <= c.PullExpiry {
		return fmt.Errorf("pinned TTL %s must be longer than the pull expiry %s", c.PinnedTTL, c.PullExpiry)
	}
	return nil
}

// laneConfigs are the lanes with their in-flight limits and timeouts.
func (c *Config) laneConfigs() []lanes.Config {
	return []lanes.Config{
		{Lane: schema.LaneChat, InFlight: c.ChatInFlight, SendTimeout: c.ChatTimeout},
		{Lane: schema.LaneWebhook, InFlight: c.WebhookInFlight, SendTimeout: c.WebhookTimeout + time.Second},
		{Lane: schema.LaneEmail, InFlight: c.EmailInFlight, SendTimeout: 30 * time.Second},
	}
}

// holdJobs is how many jobs one partition of a lane may hold (a JOBS message is a batch of
// them): four times the lane's in-flight posts, 2,048 for chat.
func holdJobs(inFlight int) int { return max(4*inFlight, 1000) }

// partitionMaxAckPending is each job consumer's MaxAckPending: the JOBS messages one worker
// may hold of a partition, whatever their jobs. It bounds what a worker takes right after it
// takes a partition over, when the bound in jobs is not applied (lanes.Partition.full):
// 256 batches of at most schema.BatchMaxBytes, 8 MiB. In steady state the bound in jobs comes
// first but at the lowest rates (a job a batch: 256 a partition, 4,096 a lane).
const partitionMaxAckPending = 256

// partitionHoldBytes bounds the jobs' bytes one partition holds: 2 MiB is ~2,000 jobs of a
// long chat message each, and holds the 16 partitions of a lane to 32 MiB of jobs.
const partitionHoldBytes = 2 << 20

// Provision creates or updates what workers use and may not create themselves (their
// credentials do not allow it): the THREADS and WORKERS buckets and every lane's job
// consumers, with the queue's timers from cfg. The edge calls it at start, after the streams.
func Provision(ctx context.Context, js jetstream.JetStream, replicas int, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if err := schema.EnsureWorkerBuckets(ctx, js, replicas, cfg.MemberTTL); err != nil {
		return fmt.Errorf("worker buckets: %w", err)
	}
	for _, lc := range cfg.laneConfigs() {
		for i := range schema.JobShards(lc.Lane) {
			cc := lanes.ConsumerConfig(lc.Lane, i, cfg.AckWait, cfg.PinnedTTL, partitionMaxAckPending)
			if _, err := js.CreateOrUpdateConsumer(ctx, schema.StreamJobs, cc); err != nil {
				return fmt.Errorf("consumer %s: %w", schema.JobConsumer(lc.Lane, i), err)
			}
		}
	}
	return nil
}

// httpClient is a target's client: egress.Client checks every address it connects to
// (unless allowPrivate) and follows no redirects.
func httpClient(perHost int, timeout time.Duration, h2c, allowPrivate bool) *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   perHost, // keep a socket per in-flight post: no reconnects under load
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	if h2c {
		// Only HTTP/2: a Transport with HTTP1 in its protocols uses HTTP/1.1 for http:// URLs.
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
		tr.Protocols.SetHTTP2(true)
	}
	return egress.Client(tr, timeout, allowPrivate)
}

// Run consumes jobs until ctx ends, then stops gracefully: hands its partitions over, lets
// in-flight deliveries finish (bounded by StopTimeout), acks what is done and returns nil.
// nc stays open (it belongs to the caller).
func Run(ctx context.Context, nc *nats.Conn, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = nuid.Next()
	}
	log = log.With("worker", cfg.WorkerID)
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := metrics.New(reg)

	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192), jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		return err
	}
	stream, err := waitStream(ctx, js, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	threadsKV, workersKV, err := waitQueue(ctx, js, stream, &cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	siteCache, err := sites.Open(ctx, js, cfg.SitesKey, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("SITES bucket: %w", err)
	}
	mailer, err := email.New(cfg.SMTP)
	if err != nil {
		return err
	}

	// What the worker hears or fetches from outside goes to the edge on INBOUND: replies from
	// Discord's gateway, files posted in Slack and Discord threads (their bytes in INBOUND_FILES).
	objects, err := js.ObjectStore(ctx, schema.BucketInboundFiles)
	if err != nil {
		return fmt.Errorf("%s: %w", schema.BucketInboundFiles, err)
	}
	files := gateway.ObjectFiles{Store: objects}
	publishInbound := func(ctx context.Context, in *schema.Inbound) error {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		_, err = js.Publish(ctx, schema.InboundSubject(cfg.WorkerID), b, jetstream.WithMsgID(in.ID))
		return err
	}
	fetchHTTP := httpClient(4, time.Minute, false, cfg.AllowPrivateTargets)
	// One cache of THREADS for the senders and the gateways: a thread one opens, the others
	// know at once.
	threadStore := threads.New(threadsKV)

	senders := map[string]map[string]deliver.Sender{
		schema.LaneChat: {
			schema.TargetSlack: slack.New(slack.Options{APIURL: cfg.SlackAPI, HTTP: slack.NewHTTP(cfg.ChatInFlight),
				Threads: threadStore, Pace: cfg.SlackPace, MergeMax: cfg.SlackMerge,
				Fetch: slackFetch(fetchHTTP, files, publishInbound, cfg.AllowPrivateTargets)}),
			schema.TargetDiscord: discord.New(httpClient(cfg.ChatInFlight, 0, cfg.H2C, cfg.AllowPrivateTargets), cfg.DiscordAPI, threadStore, cfg.AllowPrivateTargets),
		},
		schema.LaneWebhook: {schema.TargetWebhook: webhook.New(httpClient(cfg.WebhookInFlight, cfg.WebhookTimeout, false, cfg.AllowPrivateTargets), cfg.AllowPrivateTargets)},
		schema.LaneEmail:   {schema.TargetEmail: mailer},
	}

	out := lanes.NewResultPublisher(js, schema.ResultSubject(cfg.WorkerID), cfg.AckWait, log)
	// Sends outlive ctx: at stop they get StopTimeout to finish.
	sendCtx, cancelSends := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSends()
	var all []*lanes.Lane
	for _, lc := range cfg.laneConfigs() {
		lc.MaxAttempts, lc.RetryBase, lc.RetryMax = cfg.MaxAttempts, cfg.RetryBase, cfg.RetryMax
		lc.AckWait, lc.PullExpiry = cfg.AckWait, cfg.PullExpiry
		lc.PullBatch = min(max(lc.InFlight/4, 32), 256)
		lc.HoldJobs, lc.HoldBytes = holdJobs(lc.InFlight), partitionHoldBytes
		all = append(all, lanes.New(lc, lanes.Env{JS: js, Stream: stream, Sites: siteCache,
			Senders: senders[lc.Lane], Out: out, M: m, Log: log}, sendCtx))
	}

	group := members.New(workersKV, cfg.WorkerID, cfg.MemberTTL, log)
	gw := gateway.New(gateway.Config{URL: cfg.DiscordGateway, Threads: threadStore, Sessions: gateway.KVSessions{KV: threadsKV}, Log: log,
		Files: files, AnyFileHost: cfg.AllowPrivateTargets, Download: gateway.HTTPDownload(fetchHTTP), Publish: publishInbound})
	liveNow := make(chan []string, 1)
	gwDone := make(chan struct{})
	go func() {
		defer close(gwDone)
		holdGateways(ctx, gw, siteCache, group.ID, liveNow)
	}()
	log.Info("worker started", "partitions", schema.JobPartitions, "chat_inflight", cfg.ChatInFlight)
	err = group.Run(ctx, func(live []string) {
		log.Info("workers changed", "live", len(live))
		select { // the latest list replaces one not yet taken
		case <-liveNow:
		default:
		}
		liveNow <- live
		for _, l := range all {
			for _, s := range l.Partitions() {
				owner := members.Owner(live, s.Name)
				s.SetWant(ctx, owner == group.ID, cfg.StopTimeout)
			}
		}
	})
	if err != nil && ctx.Err() == nil {
		log.Error("membership", "err", err)
	}

	// Stop: release every shard at once (each finishes its in-flight sends, gives back the
	// rest, flushes acks and unpins), bounded by StopTimeout.
	var wg sync.WaitGroup
	for _, l := range all {
		for _, s := range l.Partitions() {
			wg.Go(func() { s.SetWantSync(false, cfg.StopTimeout) })
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.StopTimeout + 2*time.Second):
		log.Warn("stop: some partitions did not hand over in time")
	}
	<-gwDone
	gw.Close()
	cancelSends()
	out.Close()
	log.Info("worker stopped")
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// slackFetch brings in a file posted in a Slack thread (Job.Fetch): downloaded with the site's
// bot token from Slack's file host (any host with allowPrivate: labs and tests), put in
// INBOUND_FILES (once: a retry finds it there), then announced on INBOUND for the edge.
func slackFetch(c *http.Client, files gateway.Files, publish func(context.Context, *schema.Inbound) error, allowPrivate bool) func(context.Context, *schema.SiteDelivery, *schema.Job) error {
	return func(ctx context.Context, site *schema.SiteDelivery, j *schema.Job) error {
		f := j.Fetch
		if !gateway.AllowedURL(f.URL, allowPrivate, "files.slack.com") {
			return fmt.Errorf("%w: not a Slack file URL", deliver.ErrNotFetchable)
		}
		size, err := gateway.Keep(ctx, files, f.ID, func() ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", deliver.ErrNotFetchable, err)
			}
			req.Header.Set("Authorization", "Bearer "+site.SlackToken)
			return gateway.Get(c, req, f.Size)
		})
		if err != nil {
			return err
		}
		if size == 0 { // kept by an earlier try
			size = f.Size
		}
		return publish(ctx, &schema.Inbound{ID: f.ID, Source: schema.SourceSlack, SiteID: j.SiteID, Thread: f.Thread,
			Author: f.Author, Internal: f.Internal, At: j.CreatedAt,
			File: &schema.InboundFile{Object: f.ID, Name: f.Name, Type: f.Type, Size: size}})
	}
}

// holdGateways keeps the Discord gateways of the sites this worker owns (among the live
// workers, by rendezvous hashing of "discord.<site>", as partitions are owned) open, following
// the membership and the sites' settings, until ctx ends. A worker that dies lets its key
// expire; the others see it gone and the new owner connects.
func holdGateways(ctx context.Context, gw *gateway.Manager, sc *sites.Cache, self string, liveNow <-chan []string) {
	var live []string
	for {
		select {
		case <-ctx.Done():
			return
		case live = <-liveNow:
		case <-sc.Changed():
		}
		var owned []*schema.SiteDelivery
		for _, s := range sc.WithBotToken() {
			if members.Owner(live, "discord."+strconv.FormatInt(s.SiteID, 10)) == self {
				owned = append(owned, s)
			}
		}
		gw.Set(ctx, owned)
	}
}

// waitQueue waits for what the edge provisions (buckets, then the job consumers; a worker
// may start first) and takes the queue's timers from it.
func waitQueue(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, cfg *Config, log *slog.Logger) (threadsKV, workersKV jetstream.KeyValue, err error) {
	last := schema.JobConsumer(schema.LaneEmail, schema.JobShards(schema.LaneEmail)-1)
	warned := false
	for {
		threadsKV, err = js.KeyValue(ctx, schema.BucketThreads)
		if err == nil {
			workersKV, err = js.KeyValue(ctx, schema.BucketWorkers)
		}
		var first jetstream.Consumer
		if err == nil {
			first, err = stream.Consumer(ctx, schema.JobConsumer(schema.LaneChat, 0))
		}
		if err == nil {
			_, err = stream.Consumer(ctx, last)
		}
		if err == nil {
			cc := first.CachedInfo().Config
			cfg.AckWait, cfg.PinnedTTL = cc.AckWait, cc.PinnedTTL
			if st, serr := workersKV.Status(ctx); serr == nil && st.TTL() > 0 {
				cfg.MemberTTL = st.TTL()
			}
			if err := cfg.fitPull(); err != nil {
				return nil, nil, err
			}
			log.Debug("queue timers from the edge", "ack_wait", cfg.AckWait, "pinned_ttl", cfg.PinnedTTL, "member_ttl", cfg.MemberTTL)
			return threadsKV, workersKV, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return nil, nil, err
		}
		if !warned {
			log.Info("waiting for the job consumers and buckets (the edge creates them)", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitStream waits for the edge to create JOBS (a worker may start first).
func waitStream(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (jetstream.Stream, error) {
	warned := false
	for {
		s, err := js.Stream(ctx, schema.StreamJobs)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrJetStreamNotEnabled) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if !warned {
			log.Info("waiting for the JOBS stream (the edge creates it)", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
