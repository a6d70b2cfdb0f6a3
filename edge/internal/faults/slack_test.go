package faults

import (
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
)

// slackOutage is how long Slack is away: minutes, as on a bad day, not seconds.
const slackOutage = 2 * time.Minute

// Slack goes away for two minutes (every connection to it cut and refused) while visitors keep
// writing, in the two-process shape: bin/edge with its embedded NATS and one bin/worker. The
// backlog waits in JOBS, not in memory: the edge's and the worker's RSS stay bounded while
// tens of thousands of jobs pile up, nothing goes to DEAD, and once Slack is back every acked
// message is posted.
func TestSlackDownForMinutes(t *testing.T) {
	edgeBin, workerBin := edgetest.Bin(t, "edge"), edgetest.Bin(t, "worker")
	dir := t.TempDir()
	data := dir + "/edge"
	testkit.NoErr(t, os.Mkdir(data, 0o700))
	slack := mock.NewSlack(mock.SlackOptions{Latency: 2 * time.Millisecond})
	slackSrv := httptest.NewServer(slack)
	defer slackSrv.Close()
	proxy := edgetest.NewProxy(t, slackSrv.Listener.Addr().String())

	p := edgetest.StartProc(t, edgeBin, data, append([]string{"-worker", "none"}, edgetest.NoBrakes...)...)
	site := edgetest.AddSite(t, data, &store.Site{Name: "slack away", Origins: []string{"http://site.test"},
		SlackToken: "xoxb-away", SlackChannel: "CAWAY0001"})
	creds := edgetest.Creds(t, edgeBin, data, "worker", "box1.example.com-1")
	w := edgetest.StartWorker(t, workerBin, dir, "box1.example.com-1", "-nats-url", "nats://"+p.NATSAddr, "-nats-creds", creds,
		"-slack-api", "http://"+proxy.Addr+"/api/", "-retry-base", "1s", "-retry-max", "10s")
	t.Cleanup(func() {
		if t.Failed() {
			tail := func(s string) string { return s[max(0, len(s)-3000):] }
			t.Logf("edge:\n%s\nworker:\n%s", tail(p.Log()), tail(w.Log()))
		}
	})

	l := startLoad(t, p.Addr, site.Key, 10, 20*time.Millisecond)
	testkit.WaitFor(t, "posts before the outage", 30*time.Second, func() bool { return slack.Count() >= 200 })

	proxy.Cut()
	cutAt, postsAtCut, ackedAtCut := time.Now(), slack.Count(), l.Acked()
	type sample struct{ edge, worker int64 }
	first := sample{p.RSS(), w.RSS()}
	peak, half := first, sample{}
	var curve []string // every 20 s, for the log
	var mu sync.Mutex
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			e, wk := p.RSS(), w.RSS()
			mu.Lock()
			peak.edge, peak.worker = max(peak.edge, e), max(peak.worker, wk)
			if half.edge == 0 && time.Since(cutAt) >= slackOutage/2 {
				half = sample{e, wk}
			}
			if s := int(time.Since(cutAt).Round(time.Second).Seconds()); s%20 == 0 {
				curve = append(curve, fmt.Sprintf("%ds %d acked: edge %.0f MB, worker %.0f MB", s, l.Acked()-ackedAtCut, float64(e)/1e6, float64(wk)/1e6))
			}
			mu.Unlock()
		}
	}()
	// The outage is a length of time, not a condition: Slack is away for it, whatever happens.
	time.Sleep(slackOutage)
	close(done)
	<-sampled
	last := sample{p.RSS(), w.RSS()}
	backlog := l.Acked() - ackedAtCut
	// A request already through the proxy when it cut may still be read by the mock a moment
	// later; one that arrives a second after the cut came through a cut connection.
	through := 0
	for _, post := range slack.Posts()[postsAtCut:] {
		if post.Received.After(cutAt.Add(time.Second)) {
			through++
		}
	}
	if through > 0 {
		t.Fatalf("%d posts reached Slack through a cut connection", through)
	}
	proxy.Restore()
	restoredAt := time.Now()

	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	t.Logf("Slack away %s: %d messages acked meanwhile; RSS edge %s at the cut, peak %s, %s at the end; worker %s, peak %s, %s",
		slackOutage, backlog, mb(first.edge), mb(peak.edge), mb(last.edge), mb(first.worker), mb(peak.worker), mb(last.worker))
	t.Logf("RSS during the outage: %s", strings.Join(curve, "; "))
	if backlog < 10000 {
		t.Fatalf("only %d messages acked during the outage: the load did not build a backlog", backlog)
	}
	// Bounded, not proportional to the backlog: over the second half of the outage the
	// backlog doubles while the memory stays about where it was (the worker holds at most
	// its consumers' max ack pending, the edge the store's caches). A job held in memory
	// costs its text and a few hundred bytes: 25,000 more would be past these margins.
	if grew := last.edge - half.edge; grew > 32<<20 {
		t.Errorf("edge RSS grew by %s over the second half of the outage", mb(grew))
	}
	if grew := last.worker - half.worker; grew > 16<<20 {
		t.Errorf("worker RSS grew by %s over the second half of the outage", mb(grew))
	}
	if peak.edge > 256<<20 || peak.worker > 128<<20 {
		t.Errorf("RSS peaked at %s (edge) and %s (worker) during the outage", mb(peak.edge), mb(peak.worker))
	}

	testkit.WaitFor(t, "acks after Slack is back", 30*time.Second, func() bool { return l.Acked() > ackedAtCut+backlog+100 })
	acked, errs := l.Stop()
	if len(errs) > 0 {
		t.Fatalf("visitors failed: %v", errs)
	}
	var left []string
	testkit.WaitFor(t, "every acked message posted after Slack is back", 3*time.Minute, func() bool {
		left = missing(slack, acked)
		return len(left) == 0
	})
	t.Logf("%d acked; every one posted %s after Slack came back (%s after it went away)",
		len(acked), time.Since(restoredAt).Round(100*time.Millisecond), time.Since(cutAt).Round(time.Second))
	if dead, ok := edgetest.Metric(p.MetricsAddr, `spookat_delivery_results_total{status="dead",target="slack"}`); ok && dead > 0 {
		t.Fatalf("%v deliveries went to DEAD", dead)
	}
}
