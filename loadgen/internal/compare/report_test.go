package compare

import (
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"spookat/loadgen/internal/stairs"
)

func stair(rate, p99, edgeUS float64, delivered bool) stairs.StairReport {
	cpu := edgeUS * rate / 1e4
	s := stairs.StairReport{TargetRate: rate, AckedRate: rate, Latency: stairs.Latency{P50: p99 / 3, P99: p99, Max: p99 * 2}, Errors: map[string]int64{},
		Procs: []stairs.ProcReport{{Name: "edge", CPUPercent: &cpu, CPUMicrosPerMsg: &edgeUS, RSSPeakMB: 50}}}
	if delivered {
		s.Slack = &stairs.SlackReport{AllDelivered: true, DeliveredRate: rate}
	}
	return s
}

func TestSummaryAndRendering(t *testing.T) {
	r := &Report{Stairs: []float64{1000, 10000}, Step: "10s", Sockets: 100, Sites: 120, Generator: "CPUs 1"}
	r.Results = []Result{
		{Setup: AllSetups[0], Report: &stairs.Report{Stairs: []stairs.StairReport{stair(1000, 2, 40, false), stair(10000, 80, 45, false)}}},
		{Setup: AllSetups[1], Report: &stairs.Report{Stairs: []stairs.StairReport{stair(1000, 1.5, 30, false), stair(10000, 20, 33, false)}}},
		{Setup: AllSetups[3], Error: "worker exited"},
	}
	r.Summary = summarize(r)
	joined := strings.Join(r.Summary, "\n")
	for _, want := range []string{
		"one-process: highest stair with p99 ≤ 50 ms, no errors: 1000/s",
		"two-process: highest stair with p99 ≤ 50 ms, no errors: 10000/s",
		"two-process is better than one-process at 1000/s",
		"10000/s (p99 20.00 vs 80.00 ms, edge 33.0 vs 45.0 µs/msg)", // two-process first, as in the sentence
		"two-process+slack: no result (worker exited)",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("summary lacks %q:\n%s", want, joined)
		}
	}
	md := r.Markdown("p99.svg")
	if !strings.Contains(md, "| two-process | 10000 | 10000 | 6.67 | 20.00 |") || !strings.Contains(md, "![p99 against rate](p99.svg)") {
		t.Errorf("markdown:\n%s", md)
	}
	svg := r.SVG()
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("svg is not XML: %v\n%s", err, svg)
	}
	if strings.Count(svg, "<polyline") != 2 {
		t.Errorf("want 2 lines:\n%s", svg)
	}
}

func TestEdgeOverPeer(t *testing.T) {
	peerStair := func(rate, p99, us float64) stairs.StairReport {
		s := stair(rate, p99, us, false)
		s.Procs[0].Name, s.Procs[0].RSSPeakMB = "peer", 40
		return s
	}
	twoSlack := stair(5000, 18, 115, true)
	wus := 46.0
	twoSlack.Procs = append(twoSlack.Procs, stairs.ProcReport{Name: "worker", CPUMicrosPerMsg: &wus})
	r := &Report{Stairs: []float64{5000, 10000}}
	r.Results = []Result{
		{Setup: AllSetups[0], Report: &stairs.Report{Stairs: []stairs.StairReport{stair(10000, 15, 31.5, false)}}},
		{Setup: AllSetups[3], Report: &stairs.Report{Stairs: []stairs.StairReport{twoSlack}}},
		{Setup: PeerSetups[1], Report: &stairs.Report{Stairs: []stairs.StairReport{peerStair(10000, 10, 25.2)}}},
		{Setup: PeerSetups[2], Report: &stairs.Report{Stairs: []stairs.StairReport{peerStair(5000, 12, 100)}}},
		{Setup: PeerSetups[0], Skipped: true, Error: "npm is not installed"},
	}
	r.Summary, r.Ratios = summarize(r), ratios(r)
	if len(r.Ratios) != 2 {
		t.Fatalf("want one pair without Slack and one with: %+v", r.Ratios)
	}
	cases := []struct {
		name                      string
		q                         Ratio
		edge, peer                string
		cpu, withWorker, p99, rss float64
	}{
		{"no Slack", r.Ratios[0], "one-process", "peer+group", 1.25, 0, 1.5, 1.25},
		{"with Slack", r.Ratios[1], "two-process+slack", "peer+slack", 1.15, 1.61, 1.5, 1.25},
	}
	near := func(p *float64, want float64) bool {
		return p != nil && math.Abs(*p-want) < 0.005 || p == nil && want == 0
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := c.q
			if q.Edge != c.edge || q.Peer != c.peer || !near(q.CPU, c.cpu) || !near(q.WithWorker, c.withWorker) || !near(q.P99, c.p99) || !near(q.RSS, c.rss) {
				t.Errorf("got %s ÷ %s cpu %v (+worker %v) p99 %v rss %v", q.Edge, q.Peer, deref(q.CPU), deref(q.WithWorker), deref(q.P99), deref(q.RSS))
			}
		})
	}
	md := r.Markdown("")
	for _, want := range []string{"| one-process | peer+group | 10000 | 1.25 | – | 1.50 | 1.25 |", "peer: SKIPPED (npm is not installed)", "**SKIPPED**"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// The worker's cost a post is its CPU over the posts delivered, not the messages acked: a
// worker behind its backlog posts fewer than were acked.
func TestWorkerCostAPost(t *testing.T) {
	s := stair(10000, 40, 70, false)
	wcpu, wus := 31.0, 31.0 // 31 % of a core over 10,000 acked a second
	s.Procs = append(s.Procs, stairs.ProcReport{Name: "worker", CPUPercent: &wcpu, CPUMicrosPerMsg: &wus})
	s.Slack = &stairs.SlackReport{DeliveredRate: 5000}
	r := &Report{Stairs: []float64{10000}}
	r.Results = []Result{{Setup: AllSetups[3], Report: &stairs.Report{Stairs: []stairs.StairReport{s}}}}
	md := r.Markdown("")
	if !strings.Contains(md, "| 31 | 31.0 | 62.0 | 50 |") {
		t.Errorf("want the worker's 31 %% as 31.0 µs a message and 62.0 µs a post:\n%s", md)
	}
	s.Slack = nil // no Slack setup: no posts
	r.Results[0].Report.Stairs[0] = s
	if md := r.Markdown(""); !strings.Contains(md, "| 31 | 31.0 | – | 50 |") {
		t.Errorf("want no cost a post without Slack:\n%s", md)
	}
}

// With rounds, a ratio is taken within a round (never one round's edge over another's peer)
// and the medians are over the rounds.
func TestRoundsPairWithinARound(t *testing.T) {
	peerStair := func(us float64) stairs.StairReport {
		s := stair(10000, 10, us, false)
		s.Procs[0].Name = "peer"
		return s
	}
	edge := []float64{30, 40, 33} // the VM's minutes: round 2 slow for both
	peer := []float64{25, 32, 30}
	inbox := []float64{33, 46, 36}
	r := &Report{Stairs: []float64{10000}, Rounds: 3}
	for i := range 3 {
		round := i + 1
		r.Results = append(r.Results,
			Result{Setup: AllSetups[0], Round: round, Report: &stairs.Report{Stairs: []stairs.StairReport{stair(10000, 10, edge[i], false)}}},
			Result{Setup: InboxSetups[0], Round: round, Report: &stairs.Report{Stairs: []stairs.StairReport{stair(10000, 10, inbox[i], false)}}},
			Result{Setup: PeerSetups[1], Round: round, Report: &stairs.Report{Stairs: []stairs.StairReport{peerStair(peer[i])}}})
	}
	r.Summary, r.Ratios = summarize(r), ratios(r)
	r.Medians = medians(r.Ratios, r.Rounds)
	var plain []Ratio // one-process's (one-process+inbox is paired with the peer too)
	for _, q := range r.Ratios {
		if q.Edge == "one-process" {
			plain = append(plain, q)
		}
	}
	if len(r.Ratios) != 6 || len(plain) != 3 {
		t.Fatalf("want one ratio a round for each edge setup, got %d: %+v", len(r.Ratios), r.Ratios)
	}
	for i, q := range plain {
		if want := edge[i] / peer[i]; q.Round != i+1 || q.CPU == nil || math.Abs(*q.CPU-want) > 1e-9 {
			t.Errorf("round %d: got round %d cpu %v, want %.3f", i+1, q.Round, deref(q.CPU), want)
		}
	}
	// 1.2, 1.25, 1.1: the median is 1.2.
	if len(r.Medians) != 2 || r.Medians[0].Edge != "one-process" || r.Medians[0].Of != 3 || r.Medians[0].CPU == nil || math.Abs(*r.Medians[0].CPU-1.2) > 1e-9 {
		t.Fatalf("medians: %+v", r.Medians)
	}
	md, joined := r.Markdown(""), strings.Join(r.Summary, "\n")
	for _, want := range []string{
		"| one-process #2 | 10000 |",
		"| one-process #2 | peer+group #2 | 10000 | 1.25 |",
		"## Edge ÷ peer, the median over 3 rounds",
		"| one-process | peer+group | 10000 | 3 | 1.20 |",
		"round 2: 50 inboxes watching (one-process+inbox) cost the edge per message: 10000/s +15 %",
		"median over the rounds: 50 inboxes watching (one-process+inbox) cost the edge per message: 10000/s +10 % (of 3 rounds)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(joined, "one-process #3: highest stair") {
		t.Errorf("summary:\n%s", joined)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		vs   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(c.vs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.vs, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
}
