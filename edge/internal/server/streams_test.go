package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"spookat/edge/internal/broker"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
	"spookat/worker"
)

const (
	fullVisitors = 20
	fullMaxSent  = 2000 // 64 KiB of JOBS fills long before this
	fullAfter    = 40   // messages sent while JOBS is full
)

var fullLabel = regexp.MustCompile(`full v(\d{2}) m(\d{3})`)

// metric reads one series of an edge's /metrics, -1 when it is not there.
func metric(e *edgetest.Edge, series string) float64 {
	v, ok := edgetest.Metric(e.MetricsAddr, series)
	if !ok {
		return -1
	}
	return v
}

// A JOBS at its byte budget with no worker running: visitors keep getting acks (SQLite is the
// truth), /metrics shows JOBS full and the refusals, and once a worker runs (started beside
// the edge, or in the edge restarted with a higher budget) every message reaches Slack
// exactly once.
func TestFullJobsKeepsAckingAndDeliversOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		// drain makes room for the held jobs and returns the edge to read metrics from.
		drain func(t *testing.T, e *edgetest.Edge, wcfg worker.Config) *edgetest.Edge
	}{
		{"a worker starts beside the edge", func(t *testing.T, e *edgetest.Edge, wcfg worker.Config) *edgetest.Edge {
			runWorker(t, e, wcfg)
			return e
		}},
		{"the edge restarts with a higher budget and its worker", func(t *testing.T, e *edgetest.Edge, wcfg worker.Config) *edgetest.Edge {
			e.Stop(t) // the held jobs are above the persisted watermark: re-published at start
			e2 := edgetest.Start(t, e.DataDir, server.Config{InprocWorker: true, Worker: &wcfg, StreamStatsEvery: 200 * time.Millisecond})
			testkit.WaitFor(t, "the default JOBS budget applied to the existing stream", 10*time.Second, func() bool {
				return metric(e2, `spookat_stream_max_bytes{stream="JOBS"}`) == float64(schema.DefaultJobsMaxBytes)
			})
			return e2
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			slack := mock.NewSlack(mock.SlackOptions{})
			slackSrv := httptest.NewServer(slack)
			t.Cleanup(slackSrv.Close)
			wcfg := worker.DefaultConfig()
			wcfg.SlackAPI = slackSrv.URL + "/api/"
			wcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))

			e := edgetest.Start(t, "", server.Config{
				StreamLimits:     schema.StreamLimits{JobsMaxBytes: broker.MinStreamBytes},
				StreamStatsEvery: 200 * time.Millisecond,
			})
			site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "full", Origins: []string{"http://site.test"},
				SlackToken: "xoxb-full", SlackChannel: "CFULL"})
			var visitors []*edgetest.Client
			for range fullVisitors {
				visitors = append(visitors, edgetest.Dial(t, e.Addr, site.Key, ""))
			}

			// Send until JOBS refuses jobs, then some more: every one is acked.
			sent, fullAt := 0, -1
			pad := strings.Repeat("·", 200)
			for ; sent < fullMaxSent && (fullAt < 0 || sent < fullAt+fullAfter); sent++ {
				v, k := sent%fullVisitors, sent/fullVisitors
				text := fmt.Sprintf("full v%02d m%03d %s", v, k, pad)
				if _, err := visitors[v].SendAck("c"+strconv.Itoa(sent), text); err != nil {
					t.Fatalf("message %d while JOBS fills: %v", sent, err)
				}
				if fullAt < 0 && metric(e, "spookat_jobs_full") == 1 {
					fullAt = sent
				}
			}
			if fullAt < 0 {
				t.Fatalf("JOBS never full after %d messages with -jobs-max-bytes 64KiB", sent)
			}
			t.Logf("JOBS full after %d messages; %d sent and acked in all", fullAt, sent)
			if n := edgetest.QueryInt(t, edgetest.OpenDB(t, e.DataDir), "SELECT count(*) FROM messages"); n != int64(sent) {
				t.Fatalf("%d messages in SQLite, want %d", n, sent)
			}
			testkit.WaitFor(t, "JOBS near its budget in /metrics", 10*time.Second, func() bool {
				used, limit := metric(e, `spookat_stream_bytes{stream="JOBS"}`), metric(e, `spookat_stream_max_bytes{stream="JOBS"}`)
				return limit == broker.MinStreamBytes && used > 0.8*limit
			})
			if r := metric(e, `spookat_publish_refused_total{reason="stream_full"}`); r < 1 {
				t.Fatalf("spookat_publish_refused_total{reason=\"stream_full\"} = %v while JOBS is full", r)
			}
			if metric(e, "spookat_jobs_full") != 1 {
				t.Fatal("spookat_jobs_full went back to 0 with no worker running")
			}

			e = c.drain(t, e, wcfg)

			// Every message in Slack; then, with JOBS empty and nothing held, none twice.
			count := func() map[string]int {
				seen := map[string]int{}
				for _, p := range slack.Posts() {
					for _, m := range fullLabel.FindAllString(p.Text, -1) {
						seen[m]++
					}
				}
				return seen
			}
			testkit.WaitFor(t, fmt.Sprintf("all %d messages in Slack", sent), 60*time.Second, func() bool { return len(count()) == sent })
			testkit.WaitFor(t, "JOBS drained and no job held", 30*time.Second, func() bool {
				return metric(e, "spookat_jobs_full") == 0 && metric(e, "spookat_publish_backlog") == 0 &&
					metric(e, `spookat_stream_messages{stream="JOBS"}`) == 0
			})
			for label, n := range count() {
				if n != 1 {
					t.Errorf("%q posted %d times, want once", label, n)
				}
			}
		})
	}
}

// runWorker runs a worker in the test's process against the edge's NATS, with an identity
// the edge's authority signs, until the test ends.
func runWorker(t *testing.T, e *edgetest.Edge, wcfg worker.Config) {
	t.Helper()
	auth, err := natsauth.Open(e.DataDir)
	testkit.NoErr(t, err)
	wcfg.WorkerID = "full-test"
	wcfg.SitesKey = auth.AccountPublicKey()
	id, err := auth.Issue(schema.RoleWorker, wcfg.WorkerID)
	testkit.NoErr(t, err)
	nc, err := nats.Connect(e.NATSURL, id.Options()...)
	testkit.NoErr(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, nc, wcfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
		nc.Close()
	})
}
