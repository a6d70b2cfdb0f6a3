package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/results"
	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
)

const (
	clusterSites    = 10
	clusterVisitors = 100
	clusterEvery    = 200 * time.Millisecond // per visitor: 500 messages/s in all
)

// TestClusterLosesANodeUnderLoad is spookat past one box: a real 3-node JetStream cluster
// (three bin/nats-server processes, operator auth from `edge nats-config`, TLS on the client
// port, route authorization), the edge on it with -nats-replicas 3 and -nats-creds,
// two bin/worker processes with theirs, and the Slack mock. Under a steady 500 visitor
// messages/s: SIGKILL the node that leads JOBS, start it again, then cut the edge off NATS
// for 10 s. No visitor message is refused, every acked message reaches Slack in order per
// conversation, every repeat is explained by the node's death, DEAD stays empty.
func TestClusterLosesANodeUnderLoad(t *testing.T) {
	edgeBin, workerBin, natsBin := edgetest.Bin(t, "edge"), edgetest.Bin(t, "worker"), edgetest.Bin(t, "nats-server")
	start := time.Now()
	dir := t.TempDir()
	data := filepath.Join(dir, "edge")
	auth := filepath.Join(dir, "auth.conf")
	edgetest.Admin(t, edgeBin, data, "nats-config", "-out", auth)
	tlsFiles := edgetest.NewTLS(t, dir)
	nodes := edgetest.StartCluster(t, natsBin, dir, edgetest.ClusterOptions{AuthConf: auth, TLS: &tlsFiles})
	var direct, viaProxy []string
	var proxies []*edgetest.Proxy
	for _, n := range nodes {
		direct = append(direct, n.URL())
		p := edgetest.NewProxy(t, n.ClientAddr)
		proxies = append(proxies, p)
		viaProxy = append(viaProxy, "nats://"+p.Addr)
	}
	t.Logf("3 nodes up after %s", time.Since(start).Round(time.Millisecond))

	slack := mock.NewSlack(mock.SlackOptions{Latency: 20 * time.Millisecond})
	slackSrv := httptest.NewServer(slack)
	t.Cleanup(slackSrv.Close)

	// The edge reaches the cluster only through the proxies, so cutting them cuts it off. It
	// connects with a credentials file, as with a cluster run by someone else.
	edgeCreds := edgetest.Creds(t, edgeBin, data, "edge", "")
	p := edgetest.StartProc(t, edgeBin, data, append(append([]string{"-worker", "none",
		"-nats-url", strings.Join(viaProxy, ","), "-nats-creds", edgeCreds, "-nats-replicas", "3", "-nats-tls-ca", tlsFiles.CA},
		e2eQueueFlags...), edgetest.NoBrakes...)...)
	edgetest.Admin(t, edgeBin, data, "seed", "-sites", strconv.Itoa(clusterSites), "-prefix", "cl", "-slack-token", "xoxb-cl", "-json")
	sites := slackSites(t, edgeBin, data)
	if len(sites) != clusterSites {
		t.Fatalf("%d sites with Slack, want %d", len(sites), clusterSites)
	}

	var workers []*edgetest.WorkerProc
	for _, id := range []string{"box1.example.com-1", "box2.example.com-1"} {
		creds := edgetest.Creds(t, edgeBin, data, "worker", id)
		workers = append(workers, edgetest.StartWorker(t, workerBin, dir, id, append([]string{"-nats-url", strings.Join(direct, ","),
			"-nats-creds", creds, "-nats-tls-ca", tlsFiles.CA}, e2eWorkerFlags(slackSrv.URL+"/api/")...)...))
	}
	js := edgetest.ConnectOps(t, edgeBin, data, strings.Join(direct, ","), nats.RootCAs(tlsFiles.CA))
	testkit.WaitFor(t, "2 workers in WORKERS", 30*time.Second, func() bool { return len(members(js)) == 2 })
	if info, err := streamInfo(js, schema.StreamJobs); err != nil || info.Config.Replicas != 3 {
		t.Fatalf("JOBS: %+v %v, want 3 replicas", info, err)
	}
	t.Logf("edge, 2 workers, %d sites up after %s", len(sites), time.Since(start).Round(time.Millisecond))

	// Steady load: each visitor sends a message every 200 ms (or as soon as the last one is
	// acked, when that is later). Any frame other than an ack fails the test.
	var acked atomic.Int64
	stop := make(chan struct{})
	visitors := make([]*paced, clusterVisitors)
	var wg sync.WaitGroup
	errs := make(chan error, clusterVisitors)
	for i := range visitors {
		v := &paced{n: i, siteKey: sites[i%len(sites)].key, channel: sites[i%len(sites)].channel}
		visitors[i] = v
		wg.Go(func() {
			if err := v.run(p.Addr, stop, &acked); err != nil {
				errs <- fmt.Errorf("visitor %d: %w", v.n, err)
			}
		})
	}
	waitAcked := func(n int64, what string) {
		t.Helper()
		testkit.WaitFor(t, what, 30*time.Second, func() bool { return acked.Load() >= n })
	}
	waitAcked(2500, "5 s of load")

	// 1. SIGKILL the node that leads JOBS, start it again 8 s later.
	info, err := streamInfo(js, schema.StreamJobs)
	if err != nil || info.Cluster == nil {
		t.Fatalf("JOBS cluster info: %+v %v", info, err)
	}
	leader := slices.IndexFunc(nodes, func(n *edgetest.NATSNode) bool { return n.Name == info.Cluster.Leader })
	if leader < 0 {
		t.Fatalf("JOBS leader %q is none of the nodes", info.Cluster.Leader)
	}
	takenAtKill := ackPending(t, js)
	killAt, postsAtKill := time.Now(), slack.Count()
	nodes[leader].Kill()
	t.Logf("SIGKILL %s (JOBS leader) after %d acks and %d posts; %d chat jobs taken and not acked", nodes[leader].Name, acked.Load(), postsAtKill, takenAtKill)
	waitAcked(acked.Load()+4000, "8 s of load without the node")
	nodes[leader].Start()
	nodes[leader].WaitHealthy(60 * time.Second)
	backAt := time.Now()
	if info, err := streamInfo(js, schema.StreamJobs); err == nil && info.Cluster != nil {
		t.Logf("%s back after %s; JOBS leader now %s", nodes[leader].Name, backAt.Sub(killAt).Round(time.Millisecond), info.Cluster.Leader)
	}

	// 2. Cut the edge off NATS for 10 s: visitors keep their acks, publishing waits.
	waitAcked(acked.Load()+1500, "3 s of load with the node back")
	cutAt := time.Now()
	for _, px := range proxies {
		px.Cut()
	}
	ackedAtCut := acked.Load()
	time.Sleep(10 * time.Second) // the outage itself is the condition under test
	for _, px := range proxies {
		px.Restore()
	}
	restoredAt := time.Now()
	t.Logf("edge cut off NATS for %s: %d messages acked meanwhile", restoredAt.Sub(cutAt).Round(time.Millisecond), acked.Load()-ackedAtCut)
	if acked.Load()-ackedAtCut < 2500 {
		t.Errorf("only %d messages acked while NATS was away, want the steady ~5,000", acked.Load()-ackedAtCut)
	}
	waitAcked(acked.Load()+2500, "5 s of load after the cut")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	total := int(acked.Load())
	t.Logf("%d messages acked in %s", total, time.Since(start).Round(time.Millisecond))

	// Every acked message at Slack, once at least, in order per conversation.
	label := regexp.MustCompile(`cl v(\d{3}) m(\d{5})`)
	type occ struct {
		k  int
		at time.Time
	}
	byConv := func(posts []mock.Post) (map[int][]occ, int) {
		out := map[int][]occ{}
		distinct := map[[2]int]bool{}
		for _, post := range posts {
			for _, m := range label.FindAllStringSubmatch(post.Text, -1) {
				v, _ := strconv.Atoi(m[1])
				k, _ := strconv.Atoi(m[2])
				out[v] = append(out[v], occ{k, post.Received})
				distinct[[2]int{v, k}] = true
			}
		}
		return out, len(distinct)
	}
	testkit.WaitFor(t, "every acked message at the Slack mock", 90*time.Second, func() bool {
		_, n := byConv(slack.Posts())
		return n >= total
	})
	posts := slack.Posts()
	convs, distinct := byConv(posts)
	if distinct != total {
		t.Errorf("%d distinct messages at Slack, %d acked", distinct, total)
	}
	dups, unexplained := 0, 0
	for i, v := range visitors {
		seen := map[int]bool{}
		var firsts []int
		for _, o := range convs[i] {
			if seen[o.k] {
				dups++
				first := convs[i][slices.IndexFunc(convs[i], func(x occ) bool { return x.k == o.k })]
				// A repeat is a job a worker had taken when the node died (its ack or its
				// result was lost with it), posted again after the ack wait.
				if first.at.Before(killAt.Add(-5*time.Second)) || first.at.After(backAt.Add(5*time.Second)) {
					unexplained++
				}
				continue
			}
			seen[o.k] = true
			firsts = append(firsts, o.k)
		}
		if len(firsts) != v.sent || !slices.IsSorted(firsts) {
			t.Errorf("v%03d: %d of %d messages at Slack, in order: %v (%v)", i, len(firsts), v.sent, slices.IsSorted(firsts), firsts[:min(len(firsts), 30)])
		}
	}
	if unexplained > 0 {
		t.Errorf("%d repeated posts whose first copy went out outside the node's death", unexplained)
	}
	// Repeats are jobs whose ack (or result) the dying node took with it, and deliveries it
	// lost on the way: of the order of what was in flight, far below the posts so far.
	if dups > postsAtKill/10+200 {
		t.Errorf("%d repeated posts: more than the jobs in flight around the node's death could explain", dups)
	}
	if t.Failed() {
		hist := map[int]int{}
		for i := range visitors {
			seen := map[int]time.Time{}
			for _, o := range convs[i] {
				if f, ok := seen[o.k]; ok {
					hist[int(f.Sub(killAt)/time.Second)]++
					continue
				}
				seen[o.k] = o.at
			}
		}
		t.Logf("repeats by second of first copy after the kill: %v (back at +%s, cut at +%s)", hist, backAt.Sub(killAt), cutAt.Sub(killAt))
		for _, w := range workers {
			for _, l := range strings.Split(w.Log(), "\n") {
				if strings.Contains(l, "workers changed") {
					t.Log(l)
				}
			}
		}
		for _, w := range workers {
			t.Logf("worker %s warnings:\n%s", w.ID, warnings(w.Log()))
		}
		t.Logf("edge warnings:\n%s", warnings(p.Log()))
	}

	// The failover gaps: the longest time without a post around each fault.
	gap := func(from, to time.Time) time.Duration {
		var last time.Time
		var longest time.Duration
		for _, post := range posts {
			if post.Received.Before(from) || post.Received.After(to) {
				continue
			}
			if !last.IsZero() && post.Received.Sub(last) > longest {
				longest = post.Received.Sub(last)
			}
			last = post.Received
		}
		return longest
	}
	t.Logf("%d posts for %d messages: %d repeats; longest gap without a post: %s after the JOBS leader died, %s around the edge's cut",
		len(posts), total, dups, gap(killAt.Add(-time.Second), backAt).Round(time.Millisecond),
		gap(cutAt.Add(-time.Second), restoredAt.Add(15*time.Second)).Round(time.Millisecond))

	testkit.WaitFor(t, "JOBS drained", 30*time.Second, func() bool {
		info, err := streamInfo(js, schema.StreamJobs)
		return err == nil && info.State.Msgs == 0
	})
	if info, err := streamInfo(js, schema.StreamDead); err != nil || info.State.Msgs != 0 {
		t.Errorf("DEAD: %v messages (%v), want none", info.State.Msgs, err)
	}
	db := edgetest.OpenDB(t, data)
	recorded := func() int64 {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM deliveries WHERE target = 'slack' AND status = 'delivered'`)
	}
	for deadline := time.Now().Add(30 * time.Second); recorded() != int64(total); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			c, err := js.Consumer(context.Background(), schema.StreamResults, schema.ConsumerEdgeResults)
			var ci *jetstream.ConsumerInfo
			if err == nil {
				ci, err = c.Info(context.Background())
			}
			rejected := map[string]float64{}
			for _, r := range results.Reasons {
				rejected[r], _ = edgetest.Metric(p.MetricsAddr, `spookat_results_rejected_total{reason="`+r+`"}`)
			}
			t.Fatalf("%d of %d deliveries recorded after 30 s; edge-results: %+v %v; rejected %v\nedge warnings:\n%s",
				recorded(), total, ci, err, rejected, warnings(p.Log()))
		}
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != int64(total) {
		t.Errorf("%d messages in SQLite, %d acked", n, total)
	}
	for _, w := range workers {
		if took, err := w.Stop(15 * time.Second); err != nil {
			t.Errorf("worker %s SIGTERM: %v after %s\n%s", w.ID, err, took, w.Log())
		}
	}
	if took, err := p.Stop(15 * time.Second); err != nil || took > 10*time.Second {
		t.Errorf("edge SIGTERM: exit %v after %s, want exit 0 within 10 s", err, took)
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// paced is a visitor that sends a message every clusterEvery until stop.
type paced struct {
	n                int
	siteKey, channel string
	sent             int
}

func (v *paced) run(addr string, stop <-chan struct{}, acked *atomic.Int64) error {
	c, err := edgetest.DialVisitor(addr, v.siteKey, "http://cluster.test")
	if err != nil {
		return err
	}
	defer c.WS.Close()
	tick := time.NewTicker(clusterEvery)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		// Any frame but the ack (an error frame: a visitor's message refused) fails the test.
		if _, err := c.SendAck(fmt.Sprintf("v%03d-%05d", v.n, k), fmt.Sprintf("cl v%03d m%05d", v.n, k)); err != nil {
			return err
		}
		v.sent++
		acked.Add(1)
	}
}

// warnings keeps a log's warning and error lines, at most 40 of them.
func warnings(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	if len(out) > 40 {
		out = append(out[:20], append([]string{"…"}, out[len(out)-20:]...)...)
	}
	return strings.Join(out, "\n")
}

type slackSite struct{ key, channel string }

// slackSites lists the sites with Slack delivery, each with its channel.
func slackSites(t *testing.T, bin, dir string) []slackSite {
	t.Helper()
	var list []struct {
		Key     string   `json:"key"`
		Targets []string `json:"targets"`
	}
	testkit.NoErr(t, json.Unmarshal([]byte(edgetest.Admin(t, bin, dir, "site", "list", "-json")), &list))
	var out []slackSite
	for _, s := range list {
		for _, tg := range s.Targets {
			if ch, ok := strings.CutPrefix(tg, "slack:"); ok {
				out = append(out, slackSite{s.Key, ch})
			}
		}
	}
	return out
}

func streamInfo(js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}
