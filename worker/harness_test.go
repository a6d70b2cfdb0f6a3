package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
	"spookat/worker"
)

// env is one test's world: a real embedded JetStream server that trusts only identities of
// a natsauth authority (as the edge's does), the edge's streams and consumers, the mocks over
// HTTP, and a collector standing in for the edge's RESULTS consumer. The test speaks as the
// edge; each worker connects with a worker identity of its own, so every subject a lane uses
// must be in the worker's permissions.
type env struct {
	t       *testing.T
	auth    *natsauth.Authority
	srv     *server.Server
	url     string
	nc      *nats.Conn
	js      jetstream.JetStream
	slack   *mock.Slack
	slackTS *httptest.Server
	results *collector

	// batched: publish as the edge does, one message per lane partition per publish call
	// (schema.HeaderJobs); else one message per job, as edges before batches did.
	batched  bool
	windows  int64 // publish calls so far (batch ids)
	maxBatch int   // the most jobs a published batch held
}

func newEnv(t *testing.T, slackOpt mock.SlackOptions) *env {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	testkit.NoErr(t, err)
	// The server is configured as a cluster node would be: from `edge nats-config`'s text.
	conf := filepath.Join(dir, "server.conf")
	testkit.NoErr(t, os.WriteFile(conf, []byte(auth.ServerConfig()+"listen: 127.0.0.1:-1\njetstream { store_dir: \""+filepath.Join(dir, "js")+"\" }\n"), 0o600))
	opts, err := server.ProcessConfigFile(conf)
	testkit.NoErr(t, err)
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	testkit.NoErr(t, err)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	e := &env{t: t, auth: auth, srv: srv, url: srv.ClientURL()}
	e.nc = e.connect(schema.RoleEdge, "")
	e.js, err = jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(16384))
	testkit.NoErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testkit.NoErr(t, schema.EnsureStreams(ctx, e.js, 1, schema.StreamLimits{}))
	e.slack = mock.NewSlack(slackOpt)
	e.slackTS = httptest.NewUnstartedServer(e.slack)
	e.slackTS.Config.Protocols = mock.Protocols() // HTTP/1.1 and h2c (worker -h2c)
	e.slackTS.Start()
	t.Cleanup(e.slackTS.Close)
	e.results = e.collect()
	return e
}

// connect opens a connection with a fresh identity of role.
func (e *env) connect(role schema.Role, workerID string) *nats.Conn {
	e.t.Helper()
	id, err := e.auth.Issue(role, workerID)
	if err != nil {
		e.t.Fatal(err)
	}
	// A subject the worker needs and its permissions lack shows here, not as a silent stall.
	var mu sync.Mutex
	var violations []string
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}
	})
	e.t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range violations {
			e.t.Errorf("%s identity: %s", role, v)
		}
	})
	nc, err := nats.Connect(e.url, append(id.Options(), nats.MaxReconnects(-1), onErr)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// config is the worker's default with timers shrunk so crash recovery takes seconds.
func (e *env) config() worker.Config {
	cfg := worker.DefaultConfig()
	cfg.SlackAPI = e.slackTS.URL + "/api/"
	cfg.AckWait = 2 * time.Second
	cfg.PinnedTTL = 2 * time.Second
	cfg.PullExpiry = time.Second
	cfg.MemberTTL = 1500 * time.Millisecond
	cfg.RetryBase = 50 * time.Millisecond
	cfg.RetryMax = 200 * time.Millisecond
	cfg.MaxAttempts = 4
	cfg.StopTimeout = 3 * time.Second
	cfg.AllowPrivateTargets = true // the mocks listen on 127.0.0.1
	cfg.Registerer = prometheus.NewRegistry()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel()}))
	return cfg
}

func (e *env) putSite(d schema.SiteDelivery) {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), schema.BucketSites)
	if err != nil {
		e.t.Fatal(err)
	}
	d.Signed = time.Now().UnixNano()
	data, _ := json.Marshal(d)
	key := schema.SiteKey(d.SiteID)
	if _, err := kv.Put(context.Background(), key, e.auth.SignSite(key, data)); err != nil {
		e.t.Fatal(err)
	}
}

// job builds a job as the edge does.
func job(target string, site, conv, msg int64, first bool, text string) schema.Job {
	return schema.Job{ID: schema.JobID(msg, target), Lane: schema.LaneOf(target), Target: target, SiteID: site,
		ConversationID: conv, MessageID: msg, Author: "visitor", Text: text, CreatedAt: time.Now(), First: first,
		InboxURL: "http://localhost:8080/inbox/c/" + strconv.FormatInt(conv, 10)}
}

// publish publishes jobs asynchronously, as the edge does, and waits for JetStream to store them.
func (e *env) publish(jobs ...schema.Job) {
	e.t.Helper()
	if e.batched {
		e.publishBatches(jobs)
		return
	}
	for _, j := range jobs {
		m := nats.NewMsg(schema.JobSubject(j.Lane, j.SiteID, j.ConversationID))
		m.Data, _ = json.Marshal(j)
		m.Header.Set(jetstream.MsgIDHeader, j.ID)
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			e.t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		e.t.Fatal("jobs not stored")
	}
}

// publishBatches publishes the jobs as one window of the edge: a batch per lane partition,
// jobs in the order given.
func (e *env) publishBatches(jobs []schema.Job) {
	e.t.Helper()
	e.windows++
	type key struct {
		lane string
		part int
	}
	var order []key
	bodies := map[key][]byte{}
	counts := map[key]int{}
	for _, j := range jobs {
		k := key{j.Lane, schema.JobPartition(j.SiteID, j.ConversationID)}
		if _, ok := bodies[k]; !ok {
			order = append(order, k)
		}
		line, _ := json.Marshal(j)
		bodies[k] = append(append(bodies[k], line...), '\n')
		counts[k]++
	}
	for _, k := range order {
		m := nats.NewMsg(schema.BatchSubject(k.lane, k.part, e.windows))
		m.Data = bodies[k]
		m.Header.Set(jetstream.MsgIDHeader, schema.BatchID(k.lane, k.part, e.windows))
		m.Header.Set(schema.HeaderJobs, strconv.Itoa(counts[k]))
		e.maxBatch = max(e.maxBatch, counts[k])
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			e.t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		e.t.Fatal("batches not stored")
	}
}

type running struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
}

// start provisions the consumers and buckets as the edge does, then runs a worker.
func (e *env) start(cfg worker.Config) *running {
	e.t.Helper()
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	if err := worker.Provision(pctx, e.js, 1, cfg); err != nil {
		e.t.Fatal(err)
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = nuid.Next()
	}
	cfg.SitesKey = e.auth.AccountPublicKey()
	w := &running{nc: e.connect(schema.RoleWorker, cfg.WorkerID), done: make(chan error, 1)}
	w.reg, _ = cfg.Registerer.(*prometheus.Registry)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- worker.Run(ctx, w.nc, cfg) }()
	e.t.Cleanup(func() { cancel(); <-w.done })
	return w
}

// stop is a SIGTERM: graceful.
func (w *running) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			t.Fatalf("worker.Run: %v", err)
		}
		w.done <- nil
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop")
	}
}

// crash cuts the worker off NATS first, so nothing is handed over or acked, like a kill.
func (w *running) crash() {
	w.nc.Close()
	w.cancel()
}

// counter sums a counter family in a worker's registry.
func (w *running) counter(name string, labels ...string) float64 {
	mfs, err := w.reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				ok := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						ok = true
					}
				}
				if !ok {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

// collector stands in for the edge's RESULTS consumer.
type collector struct {
	mu  sync.Mutex
	all []schema.Result
}

func (e *env) collect() *collector {
	c := &collector{}
	ctx := context.Background()
	cons, err := e.js.CreateOrUpdateConsumer(ctx, schema.StreamResults, jetstream.ConsumerConfig{
		Durable: schema.ConsumerEdgeResults, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		e.t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		c.mu.Lock()
		c.all = schema.DecodeResults(c.all, m.Data(), func(line []byte, err error) { e.t.Errorf("bad result %q: %v", line, err) })
		c.mu.Unlock()
		_ = m.Ack()
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cc.Stop)
	return c
}

func (c *collector) snapshot() []schema.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]schema.Result(nil), c.all...)
}

// of returns the results of one job, in arrival order.
func (c *collector) of(jobID string) []schema.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []schema.Result
	for _, r := range c.all {
		if r.JobID == jobID {
			out = append(out, r)
		}
	}
	return out
}

// final returns, per job, whether it has a delivered or dead result.
func (c *collector) final(status schema.DeliveryStatus) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for _, r := range c.all {
		if r.Status == status {
			m[r.JobID]++
		}
	}
	return m
}

// deadJobs reads the DEAD stream.
func (e *env) deadJobs() []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, schema.StreamDead)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		if m, err := s.GetMsg(ctx, seq); err == nil {
			out = append(out, m)
		}
	}
	return out
}

var markerRE = regexp.MustCompile(`c(\d+)-m(\d+)`)

func marker(conv int64, k int) string { return fmt.Sprintf("c%d-m%d", conv, k) }

// sequences returns, per conversation, the message numbers in the order the Slack mock accepted
// them (a merged post contributes its lines in order).
func sequences(posts []mock.Post) map[int64][]int {
	out := map[int64][]int{}
	for _, p := range posts {
		for _, m := range markerRE.FindAllStringSubmatch(p.Text, -1) {
			c, _ := strconv.ParseInt(m[1], 10, 64)
			k, _ := strconv.Atoi(m[2])
			out[c] = append(out[c], k)
		}
	}
	return out
}

// checkOrder: the first occurrences of a conversation's messages are 0..n-1 in order; repeats
// (redeliveries after a crash) are counted and returned.
func checkOrder(t *testing.T, conv int64, seq []int, n int) (dups int) {
	t.Helper()
	seen := map[int]bool{}
	next := 0
	for _, k := range seq {
		if seen[k] {
			dups++
			continue
		}
		if k != next {
			t.Errorf("conversation %d: message %d arrived before %d: %v", conv, k, next, seq)
			return dups
		}
		seen[k] = true
		next++
	}
	if next != n {
		t.Errorf("conversation %d: %d of %d messages arrived: %v", conv, next, n, seq)
	}
	return dups
}

// waitForMarkers waits until the mock holds every message of conversations 1..convs (perConv
// each); on timeout it names the missing ones and the workers' state in the failure.
func (e *env) waitForMarkers(t *testing.T, d time.Duration, convs, perConv int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for countMarkers(e.slack.Posts()) < convs*perConv {
		if time.Now().After(deadline) {
			seqs := sequences(e.slack.Posts())
			var missing []string
			for c := 1; c <= convs; c++ {
				got := map[int]bool{}
				for _, k := range seqs[int64(c)] {
					got[k] = true
				}
				for k := 0; k < perConv; k++ {
					if !got[k] {
						missing = append(missing, marker(int64(c), k))
					}
				}
			}
			t.Fatalf("timed out after %s: %d of %d messages at the mock; missing %v", d, countMarkers(e.slack.Posts()), convs*perConv, missing)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countMarkers(posts []mock.Post) int {
	seen := map[string]bool{}
	for _, p := range posts {
		for _, m := range markerRE.FindAllString(p.Text, -1) {
			seen[m] = true
		}
	}
	return len(seen)
}

// testLogLevel is warn; SPOOKAT_DEBUG=1 shows the workers' debug logs.
func testLogLevel() slog.Level {
	if os.Getenv("SPOOKAT_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
