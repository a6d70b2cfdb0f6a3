package compare

import (
	"encoding/xml"
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
