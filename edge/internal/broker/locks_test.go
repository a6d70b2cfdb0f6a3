package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
	"spookat/worker"
)

// The locks on the log: the embedded server as the edge runs it (operator mode, TCP listener
// on loopback), the streams and consumers as the edge provisions them, and one connection per
// role. Each "cannot" is checked twice: the server answers with a permissions violation, and
// the state it guards is unchanged.

type world struct {
	t    *testing.T
	dir  string
	auth *natsauth.Authority
	br   *broker.Broker
	url  string
	js   jetstream.JetStream // the edge's
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	requireNoErr(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	br, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	requireNoErr(t, err)
	t.Cleanup(br.Close)
	w := &world{t: t, dir: dir, auth: auth, br: br, url: br.ClientURL()}
	w.js, err = jetstream.New(br.NC)
	requireNoErr(t, err)
	requireNoErr(t, worker.Provision(ctx, w.js, 1, worker.DefaultConfig()))
	kv, err := w.js.KeyValue(ctx, schema.BucketSites)
	requireNoErr(t, err)
	_, err = kv.Put(ctx, schema.SiteKey(1), []byte(`{"site_id":1,"slack_token":"xoxb-secret","slack_channel":"C1"}`))
	requireNoErr(t, err)
	return w
}

func requireNoErr(t testing.TB, err error) {
	t.Helper()
	testkit.NoErr(t, err)
}

// client is a connection that records the permission violations the server reports.
type client struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

func (w *world) connect(role schema.Role, id string) *client {
	w.t.Helper()
	ident, err := w.auth.Issue(role, id)
	requireNoErr(w.t, err)
	c := w.connectWith(ident.Options()...)
	if role == schema.RoleOps { // its own account: JetStream through the imports
		c.js, err = jetstream.NewWithAPIPrefix(c.nc, schema.OpsAPIPrefix)
		requireNoErr(w.t, err)
	}
	return c
}

func (w *world) connectWith(opts ...nats.Option) *client {
	w.t.Helper()
	c := &client{t: w.t}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		c.mu.Lock()
		c.violations = append(c.violations, err.Error())
		c.mu.Unlock()
	}))
	nc, err := nats.Connect(w.url, opts...)
	requireNoErr(w.t, err)
	w.t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	requireNoErr(w.t, err)
	return c
}

// denied runs op (which must fail) and waits for the server's violation naming subject (or a
// subject it begins).
func (c *client) denied(what, subject string, op func(ctx context.Context) error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := op(ctx); err == nil {
		c.t.Fatalf("%s: allowed, want a permissions violation", what)
	}
	testkit.WaitFor(c.t, "a permissions violation for "+subject, 5*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, v := range c.violations {
			if strings.Contains(v, `"`+subject) {
				return true
			}
		}
		return false
	})
}

// listen subscribes to subject and waits a little for a message: the server refuses the
// subscription with a violation when the identity may not subscribe there.
func (c *client) listen(subject string) func(context.Context) error {
	return func(context.Context) error {
		sub, err := c.nc.SubscribeSync(subject)
		if err == nil {
			err = c.nc.Flush()
		}
		if err == nil {
			_, err = sub.NextMsg(500 * time.Millisecond)
		}
		return err
	}
}

func (c *client) allowed(what string, op func(ctx context.Context) error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := op(ctx); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (w *world) publishJob(site, conv int64) {
	w.t.Helper()
	j := schema.Job{ID: schema.JobID(conv*100, schema.TargetSlack), Lane: schema.LaneChat, Target: schema.TargetSlack,
		SiteID: site, ConversationID: conv, MessageID: conv * 100, Author: "visitor", Text: "hello", CreatedAt: time.Now()}
	b, _ := json.Marshal(j)
	_, err := w.js.Publish(context.Background(), schema.JobSubject(j.Lane, site, conv), b)
	requireNoErr(w.t, err)
}

func (w *world) streamMsgs(name string) uint64 {
	w.t.Helper()
	s, err := w.js.Stream(context.Background(), name)
	requireNoErr(w.t, err)
	info, err := s.Info(context.Background())
	requireNoErr(w.t, err)
	return info.State.Msgs
}

func TestNoCredentialsNoEntry(t *testing.T) {
	w := newWorld(t)
	other, err := natsauth.Open(t.TempDir()) // another edge's authority
	requireNoErr(t, err)
	foreign, err := other.Issue(schema.RoleWorker, "w1")
	requireNoErr(t, err)
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"no credentials", nil},
		{"user and password", []nats.Option{nats.UserInfo("edge", "edge")}},
		{"signed by another authority", foreign.Options()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(w.url, append(tc.opts, nats.MaxReconnects(0))...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("err = %v, want an authorization violation", err)
			}
		})
	}
}

func TestWorkerMayOnlyDoItsPart(t *testing.T) {
	w := newWorld(t)
	wk := w.connect(schema.RoleWorker, "box1.example.com-1")
	ctx := context.Background()

	// What it is for: pull and ack a job, publish its results, read SITES, its heartbeat.
	w.publishJob(1, 7)
	jobs, err := wk.js.Stream(ctx, schema.StreamJobs)
	requireNoErr(t, err)
	var got jetstream.Msg
	// Until it comes: a fetch can end empty (its wait, a pin still settling) and is tried again.
	testkit.WaitFor(t, "the worker to pull the job", 10*time.Second, func() bool {
		for p := range schema.JobPartitions {
			cons, err := jobs.Consumer(ctx, schema.JobConsumer(schema.LaneChat, p))
			requireNoErr(t, err)
			if info, _ := cons.Info(ctx); info == nil || info.NumPending == 0 {
				continue
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second), jetstream.FetchPriorityGroup(schema.JobPriorityGroup))
			requireNoErr(t, err)
			for m := range batch.Messages() {
				got = m
			}
		}
		return got != nil
	})
	wk.allowed("ack a job", func(ctx context.Context) error { return got.DoubleAck(ctx) })
	wk.allowed("publish its results", func(ctx context.Context) error {
		_, err := wk.js.Publish(ctx, schema.ResultSubject("box1.example.com-1"), []byte("{}"))
		return err
	})
	wk.allowed("read SITES", func(ctx context.Context) error {
		kv, err := wk.js.KeyValue(ctx, schema.BucketSites)
		if err != nil {
			return err
		}
		_, err = kv.Get(ctx, schema.SiteKey(1))
		return err
	})
	workers, err := wk.js.KeyValue(ctx, schema.BucketWorkers)
	requireNoErr(t, err)
	wk.allowed("its own heartbeat", func(ctx context.Context) error {
		_, err := workers.Put(ctx, schema.WorkerKey("box1.example.com-1"), []byte("{}"))
		return err
	})
	wk.allowed("a thread id", func(ctx context.Context) error {
		kv, err := wk.js.KeyValue(ctx, schema.BucketThreads)
		if err != nil {
			return err
		}
		_, err = kv.Put(ctx, schema.ThreadKey(schema.TargetSlack, 1, 7), []byte("1.0001"))
		return err
	})

	// What it may not do.
	before := w.streamMsgs(schema.StreamJobs)
	wk.denied("publish a job", "jobs.chat.1.7", func(ctx context.Context) error {
		_, err := wk.js.Publish(ctx, schema.JobSubject(schema.LaneChat, 1, 7), []byte(`{"id":"forged"}`))
		return err
	})
	if n := w.streamMsgs(schema.StreamJobs); n != before {
		t.Fatalf("JOBS went from %d to %d messages", before, n)
	}
	results := w.streamMsgs(schema.StreamResults)
	wk.denied("publish another worker's results", "results.w2", func(ctx context.Context) error {
		_, err := wk.js.Publish(ctx, schema.ResultSubject("w2"), []byte("{}"))
		return err
	})
	if n := w.streamMsgs(schema.StreamResults); n != results {
		t.Fatalf("RESULTS went from %d to %d messages", results, n)
	}
	sites, err := wk.js.KeyValue(ctx, schema.BucketSites)
	requireNoErr(t, err)
	wk.denied("write SITES", "$KV.SITES.site.1", func(ctx context.Context) error {
		_, err := sites.Put(ctx, schema.SiteKey(1), []byte(`{"site_id":1,"webhook_url":"https://evil.example"}`))
		return err
	})
	if e, err := sites.Get(ctx, schema.SiteKey(1)); err != nil || strings.Contains(string(e.Value()), "evil") {
		t.Fatalf("SITES site.1 = %v, %v", e, err)
	}
	wk.denied("write another worker's heartbeat", "$KV.WORKERS.w.w2", func(ctx context.Context) error {
		_, err := workers.Put(ctx, schema.WorkerKey("w2"), []byte("{}"))
		return err
	})
	wk.denied("change JOBS", "$JS.API.STREAM.UPDATE.JOBS", func(ctx context.Context) error {
		cfg := schema.StreamConfigs(1, schema.StreamLimits{})[0]
		cfg.MaxAge = time.Second
		_, err := wk.js.UpdateStream(ctx, cfg)
		return err
	})
	wk.denied("delete JOBS", "$JS.API.STREAM.DELETE.JOBS", func(ctx context.Context) error {
		return wk.js.DeleteStream(ctx, schema.StreamJobs)
	})
	if info, err := jobs.Info(ctx); err != nil || info.Config.MaxAge != 0 {
		t.Fatalf("JOBS after the attempts: %+v, %v", info, err)
	}
	wk.denied("change a job consumer", "$JS.API.CONSUMER.CREATE.JOBS.jobs-chat-00.jobs.chat.0.>", func(ctx context.Context) error {
		_, err := wk.js.UpdateConsumer(ctx, schema.StreamJobs, jetstream.ConsumerConfig{Durable: "jobs-chat-00",
			FilterSubject: schema.JobShardFilter(schema.LaneChat, 0), AckPolicy: jetstream.AckNonePolicy})
		return err
	})
	wk.denied("listen to every subject", ">", wk.listen(">"))
}

func TestOpsReadsReportsOnly(t *testing.T) {
	w := newWorld(t)
	ops := w.connect(schema.RoleOps, "")
	ctx := context.Background()
	w.publishJob(1, 8)
	_, err := w.connect(schema.RoleWorker, "w1").js.Publish(ctx, schema.ResultSubject("w1"), []byte(`{"job_id":"m1.slack"}`))
	requireNoErr(t, err)

	ops.allowed("stream report", func(ctx context.Context) error {
		names := ops.js.StreamNames(ctx)
		n := 0
		for range names.Name() {
			n++
		}
		if names.Err() != nil || n < 3 {
			return fmt.Errorf("%d streams listed: %v", n, names.Err())
		}
		_, err := ops.js.Stream(ctx, schema.StreamJobs)
		return err
	})
	ops.allowed("consumer report", func(ctx context.Context) error {
		s, err := ops.js.Stream(ctx, schema.StreamJobs)
		if err != nil {
			return err
		}
		for info := range s.ListConsumers(ctx).Info() {
			if info.Name == "" {
				return errors.New("a consumer without a name")
			}
		}
		return s.ListConsumers(ctx).Err()
	})
	ops.allowed("get a job", func(ctx context.Context) error {
		s, err := ops.js.Stream(ctx, schema.StreamJobs)
		if err != nil {
			return err
		}
		_, err = s.GetMsg(ctx, 1)
		return err
	})
	ops.allowed("read RESULTS by sequence", func(ctx context.Context) error {
		s, err := ops.js.Stream(ctx, schema.StreamResults)
		if err != nil {
			return err
		}
		_, err = s.GetMsg(ctx, 1)
		return err
	})
	// No consumer at all: its body (durable, a deliver subject in the edge's account) is
	// beyond what permissions check.
	ops.denied("make a durable on RESULTS", "JS.SPOOKAT.API.CONSUMER.CREATE.RESULTS.keep", func(ctx context.Context) error {
		_, err := ops.js.CreateConsumer(ctx, schema.StreamResults, jetstream.ConsumerConfig{Durable: "keep"})
		return err
	})
	ops.denied("push RESULTS into JOBS", "JS.SPOOKAT.API.CONSUMER.CREATE.RESULTS", func(ctx context.Context) error {
		_, err := ops.nc.Request(schema.OpsLocal("$JS.API.CONSUMER.CREATE."+schema.StreamResults),
			[]byte(`{"stream_name":"RESULTS","config":{"deliver_subject":"jobs.chat.1.1","ack_policy":"none"}}`), 2*time.Second)
		return err
	})

	ops.denied("read a site's token", "JS.SPOOKAT.API.DIRECT.GET.KV_SITES.$KV.SITES.site.1", func(ctx context.Context) error {
		kv, err := ops.js.KeyValue(ctx, schema.BucketSites)
		if err != nil {
			return err
		}
		_, err = kv.Get(ctx, schema.SiteKey(1))
		return err
	})
	ops.denied("take jobs off the work queue", "JS.SPOOKAT.API.CONSUMER.CREATE.JOBS", func(ctx context.Context) error {
		_, err := ops.js.CreateConsumer(ctx, schema.StreamJobs, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
		return err
	})
	ops.denied("publish a job", "jobs.chat.1.8", func(ctx context.Context) error {
		_, err := ops.js.Publish(ctx, schema.JobSubject(schema.LaneChat, 1, 8), []byte("{}"))
		return err
	})
	ops.denied("purge DEAD", "JS.SPOOKAT.API.STREAM.PURGE.DEAD", func(ctx context.Context) error {
		s, err := ops.js.Stream(ctx, schema.StreamDead)
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	})
	_, err = w.js.CreateOrUpdateConsumer(ctx, schema.StreamResults, jetstream.ConsumerConfig{Durable: schema.ConsumerEdgeResults,
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "results.>"})
	requireNoErr(t, err)
	ops.denied("delete the edge's results consumer", "JS.SPOOKAT.API.CONSUMER.DELETE.RESULTS.edge-results", func(ctx context.Context) error {
		return ops.js.DeleteConsumer(ctx, schema.StreamResults, schema.ConsumerEdgeResults)
	})
	ops.denied("change the edge's results consumer", "JS.SPOOKAT.API.CONSUMER.CREATE.RESULTS.edge-results", func(ctx context.Context) error {
		_, err := ops.js.CreateOrUpdateConsumer(ctx, schema.StreamResults, jetstream.ConsumerConfig{Durable: schema.ConsumerEdgeResults,
			AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "nothing.here"})
		return err
	})
	ops.denied("listen to every subject", ">", ops.listen(">"))

	// The server answers into whatever reply subject a request names, and a stream stores what
	// lands on its subjects: in the edge's account a read would be a write. The ops account's
	// answers land in the ops account, where no stream is. The last request answers into ops's
	// own inbox: once that has come, the others have been answered.
	probe, err := ops.nc.SubscribeSync("_INBOX.probe")
	requireNoErr(t, err)
	for _, reply := range []string{"$KV.SITES.site.1", schema.JobSubject(schema.LaneChat, 1, 9), schema.ResultSubject("w2"), "_INBOX.probe"} {
		m := nats.NewMsg(schema.OpsLocal("$JS.API.STREAM.MSG.GET." + schema.StreamJobs))
		m.Reply, m.Data = reply, []byte(`{"seq":1}`)
		requireNoErr(t, ops.nc.PublishMsg(m))
	}
	if _, err := probe.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no answer in ops's own inbox: %v", err)
	}
	sites, err := w.js.KeyValue(ctx, schema.BucketSites)
	requireNoErr(t, err)
	if e, err := sites.Get(ctx, schema.SiteKey(1)); err != nil || !strings.Contains(string(e.Value()), "xoxb-secret") {
		t.Fatalf("an answer ops asked for landed in SITES: %v, %v", e, err)
	}
	if n := w.streamMsgs(schema.StreamJobs); n != 1 {
		t.Fatalf("an answer ops asked for landed in JOBS: %d jobs", n)
	}
	if n := w.streamMsgs(schema.StreamResults); n != 1 {
		t.Fatalf("an answer ops asked for landed in RESULTS: %d messages", n)
	}

	// The SRE's own tool, as the runbook tells them to run it.
	natsCLI := filepath.Join(os.Getenv("SPOOKAT_BIN"), "nats")
	if _, err := os.Stat(natsCLI); os.Getenv("SPOOKAT_BIN") == "" || err != nil {
		t.Skipf("SKIPPED the nats CLI half: no %s (make test builds it with `make nats`)", natsCLI)
	}
	creds := filepath.Join(w.dir, "ops.creds")
	ident, err := w.auth.Issue(schema.RoleOps, "")
	requireNoErr(t, err)
	requireNoErr(t, os.WriteFile(creds, ident.Creds(), 0o600))
	cli := func(args ...string) (string, error) {
		full := append([]string{"-s", w.url, "--creds", creds, "--js-api-prefix", schema.OpsAPIPrefix, "--timeout", "2s"}, args...)
		out, err := exec.Command(natsCLI, full...).CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"stream", "report"},
		{"consumer", "report", schema.StreamJobs},
		{"stream", "get", schema.StreamResults, "1"},
		{"stream", "get", schema.StreamJobs, "1"},
		{"stream", "subjects", "KV_" + schema.BucketWorkers},
	} {
		t.Run("nats "+strings.Join(args, " "), func(t *testing.T) {
			out, err := cli(args...)
			if err != nil || strings.Contains(out, "Permissions Violation") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
	for _, args := range [][]string{
		{"kv", "get", schema.BucketSites, "site.1"},
		{"stream", "rm", schema.StreamJobs, "-f"},
		{"pub", "jobs.chat.1.8", "x"},
	} {
		t.Run("nats "+strings.Join(args, " ")+" refused", func(t *testing.T) {
			out, err := cli(args...)
			if err == nil || strings.Contains(out, "xoxb-secret") || !strings.Contains(out, "ermissions") {
				t.Fatalf("want a permissions violation, got %v\n%s", err, out)
			}
		})
	}
	if w.streamMsgs(schema.StreamJobs) != 1 {
		t.Fatal("JOBS lost its job")
	}
}

// Rotating a worker's credentials: new ones work, the revoked ones are cut off at once and
// refused afterwards.
func TestRevokedCredentialsAreCutOff(t *testing.T) {
	w := newWorld(t)
	old, err := w.auth.Issue(schema.RoleWorker, "w1")
	requireNoErr(t, err)
	requireNoErr(t, w.auth.Record(old))
	oldConn := w.connectWith(append(old.Options(), nats.MaxReconnects(0))...)
	fresh, err := w.auth.Issue(schema.RoleWorker, "w1")
	requireNoErr(t, err)
	requireNoErr(t, w.auth.Record(fresh))

	revoked, err := w.auth.Revoke(old.Key, "")
	requireNoErr(t, err)
	if len(revoked) != 1 || revoked[0].Key != old.Key {
		t.Fatalf("revoked %+v", revoked)
	}
	applied, err := w.br.ApplyAuth()
	requireNoErr(t, err)
	if !applied {
		t.Fatal("the embedded server did not apply the revocation")
	}
	testkit.WaitFor(t, "the revoked connection to close", 5*time.Second, func() bool { return oldConn.nc.IsClosed() })
	if _, err := nats.Connect(w.url, old.Options()...); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("revoked credentials: %v, want an authorization violation", err)
	}
	nc, err := nats.Connect(w.url, fresh.Options()...)
	requireNoErr(t, err)
	nc.Close()
	if _, err := w.auth.Revoke(old.Key, ""); err == nil {
		t.Fatal("revoked twice")
	}
	list, err := w.auth.Issued()
	requireNoErr(t, err)
	if len(list) != 2 || list[0].RevokedAt == nil || list[1].RevokedAt != nil {
		t.Fatalf("issued = %+v", list)
	}

	// The ops identity lives in an account of its own: its revocation is there.
	ops, err := w.auth.Issue(schema.RoleOps, "")
	requireNoErr(t, err)
	requireNoErr(t, w.auth.Record(ops))
	opsConn := w.connectWith(append(ops.Options(), nats.MaxReconnects(0))...)
	_, err = w.auth.Revoke(ops.Key, "")
	requireNoErr(t, err)
	_, err = w.br.ApplyAuth()
	requireNoErr(t, err)
	testkit.WaitFor(t, "the revoked ops connection to close", 5*time.Second, func() bool { return opsConn.nc.IsClosed() })
	if _, err := nats.Connect(w.url, ops.Options()...); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("revoked ops credentials: %v, want an authorization violation", err)
	}
}

// A worker may create consumers on the buckets it watches. It cannot use one to write where
// it may not publish: a push consumer's deliveries into SITES, JOBS or DEAD (a value it wrote
// to THREADS, laundered) are not stored there, because JetStream delivers only to a
// subscriber and the worker may subscribe to its own inbox only.
func TestWorkerCannotLaunderThroughAConsumer(t *testing.T) {
	w := newWorld(t)
	wk := w.connect(schema.RoleWorker, "evil")
	ctx := context.Background()
	th, err := wk.js.KeyValue(ctx, schema.BucketThreads)
	requireNoErr(t, err)
	forged := `{"id":"m1.webhook","lane":"webhook","target":"webhook","site_id":1,"conversation_id":1,"message_id":1,"text":"x","webhook_url":"https://evil.example"}`
	_, err = th.Put(ctx, "slack.9.9", []byte(forged))
	requireNoErr(t, err)
	// The last one delivers to the worker's own inbox: once that arrives, the others have had
	// their chance.
	own := schema.InboxPrefix(schema.RoleWorker, "evil") + ".probe"
	sub, err := wk.nc.SubscribeSync(own)
	requireNoErr(t, err)
	for i, into := range []string{"$KV.SITES.site.1", "jobs.webhook.1.1", "dead.webhook.1.1", own} {
		name := fmt.Sprintf("launder%d", i)
		body := fmt.Sprintf(`{"stream_name":"KV_THREADS","config":{"name":%q,"deliver_subject":%q,"deliver_policy":"last","ack_policy":"none","filter_subject":"$KV.THREADS.slack.9.9"}}`, name, into)
		if _, err := wk.nc.Request("$JS.API.CONSUMER.CREATE.KV_THREADS."+name+".$KV.THREADS.slack.9.9", []byte(body), 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no delivery to the worker's own inbox: %v", err)
	}
	sites, err := w.js.KeyValue(ctx, schema.BucketSites)
	requireNoErr(t, err)
	if e, err := sites.Get(ctx, schema.SiteKey(1)); err != nil || strings.Contains(string(e.Value()), "evil") {
		t.Fatalf("SITES site.1 = %v, %v", e, err)
	}
	if n, d := w.streamMsgs(schema.StreamJobs), w.streamMsgs(schema.StreamDead); n != 0 || d != 0 {
		t.Fatalf("laundered into JOBS (%d) or DEAD (%d)", n, d)
	}
}
