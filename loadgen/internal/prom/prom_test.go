package prom

import (
	"math"
	"strings"
	"testing"

	"spookat/schema/testkit"
)

const scrape = `# HELP go_sched_latencies_seconds Distribution of the time goroutines have spent in the scheduler in a runnable state before actually running.
# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="6.399999999999999e-08"} 100
go_sched_latencies_seconds_bucket{le="6.399999999999999e-07"} 400
go_sched_latencies_seconds_bucket{le="7.167999999999999e-06"} 900
go_sched_latencies_seconds_bucket{le="8.191999999999999e-05"} 990
go_sched_latencies_seconds_bucket{le="0.000917504"} 1000
go_sched_latencies_seconds_bucket{le="+Inf"} 1000
go_sched_latencies_seconds_sum NaN
go_sched_latencies_seconds_count 1000
# TYPE spookat_messages_saved_total counter
spookat_messages_saved_total 12345
spookat_open_sockets{kind="widget"} 7
spookat_open_sockets{kind="inbox",note="a \"quoted\", value"} 3 1700000000000
`

func TestParse(t *testing.T) {
	m, err := Parse(strings.NewReader(scrape))
	testkit.NoErr(t, err)
	if got := m.Sum("spookat_messages_saved_total"); got != 12345 {
		t.Fatalf("saved = %v", got)
	}
	if got := m.Sum("spookat_open_sockets"); got != 10 {
		t.Fatalf("sockets = %v", got)
	}
	var note string
	for _, s := range m.Samples {
		if s.Labels["kind"] == "inbox" {
			note = s.Labels["note"]
		}
	}
	if note != `a "quoted", value` {
		t.Fatalf("label = %q", note)
	}
	if !math.IsNaN(m.Sum("go_sched_latencies_seconds_sum")) {
		t.Fatal("NaN sum")
	}
	h := m.Histogram("go_sched_latencies_seconds")
	if len(h) != 6 || !math.IsInf(h[5].UpperBound, 1) || h[0].Count != 100 {
		t.Fatalf("histogram = %v", h)
	}
	if _, err := Parse(strings.NewReader("foo{a=\"x\" 1\n")); err == nil {
		t.Fatal("bad line: want error")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestQuantile(t *testing.T) {
	b := []Bucket{{1, 10}, {2, 30}, {4, 40}, {math.Inf(1), 40}}
	cases := []struct{ q, want float64 }{
		{0, 0},
		{0.25, 1},     // rank 10 = top of the first bucket
		{0.5, 1.5},    // rank 20: half-way through (1,2], which holds 20
		{0.75, 2},     // rank 30
		{0.875, 3},    // rank 35: half-way through (2,4]
		{1, 4},        // rank 40
		{0.125, 0.5},  // rank 5: first bucket interpolates from 0
		{0.625, 1.75}, // rank 25
	}
	for _, c := range cases {
		if got := Quantile(c.q, b); !near(got, c.want) {
			t.Errorf("q=%v: got %v want %v", c.q, got, c.want)
		}
	}
	// A rank that falls in +Inf returns the highest finite bound.
	inf := []Bucket{{1, 5}, {2, 8}, {math.Inf(1), 10}}
	if got := Quantile(0.99, inf); got != 2 {
		t.Errorf("+Inf: got %v", got)
	}
	if !InOverflow(0.99, inf) || InOverflow(0.5, inf) || InOverflow(0.99, b) {
		t.Error("InOverflow")
	}
	if got := Quantile(0.5, []Bucket{{1, 0}, {math.Inf(1), 0}}); !math.IsNaN(got) {
		t.Errorf("empty: got %v", got)
	}
	if got := Max(b); got != 4 {
		t.Errorf("max = %v", got)
	}
	if got := Max(inf); got != 2 {
		t.Errorf("max +Inf = %v", got)
	}
}

func TestDeltaQuantile(t *testing.T) {
	m, err := Parse(strings.NewReader(scrape))
	testkit.NoErr(t, err)
	before := m.Histogram("go_sched_latencies_seconds")
	after := []Bucket{
		{6.399999999999999e-08, 100},
		{6.399999999999999e-07, 400},
		{7.167999999999999e-06, 900},
		{8.191999999999999e-05, 990 + 98},
		{0.000917504, 1000 + 100},
		{math.Inf(1), 1000 + 100},
	}
	d := Delta(before, after)
	if Total(d) != 100 || d[3].Count != 98 || d[0].Count != 0 {
		t.Fatalf("delta = %v", d)
	}
	// 100 new observations: 98 in (7.168e-6, 8.192e-5], 2 in (8.192e-5, 9.175e-4].
	// p99 = rank 99: 1 of the 2 in the top bucket → half-way.
	want := 8.191999999999999e-05 + (0.000917504-8.191999999999999e-05)*0.5
	if got := Quantile(0.99, d); !near(got, want) {
		t.Fatalf("p99 = %v want %v", got, want)
	}
	// p50 = rank 50 of 98 in (7.168e-6, 8.192e-5].
	want = 7.167999999999999e-06 + (8.191999999999999e-05-7.167999999999999e-06)*50/98
	if got := Quantile(0.5, d); !near(got, want) {
		t.Fatalf("p50 = %v want %v", got, want)
	}
}
