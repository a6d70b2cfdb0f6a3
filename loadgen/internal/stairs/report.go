package stairs

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"spookat/loadgen/internal/procfs"
)

// Report is what `loadgen run` writes to report.json.
type Report struct {
	Setup          string           `json:"setup,omitempty"`
	StartedAt      time.Time        `json:"started_at"`
	Edge           string           `json:"edge"`
	Sites          int              `json:"sites"`
	Sockets        int              `json:"sockets"`
	SocketsOpen    int              `json:"sockets_open"`
	ConnectSeconds float64          `json:"connect_seconds"`
	Step           string           `json:"step"`
	Warmup         string           `json:"warmup"`
	Tick           string           `json:"tick"`
	Senders        int              `json:"senders"`
	EdgePID        int              `json:"edge_pid,omitempty"`
	WorkerPIDs     []int            `json:"worker_pids,omitempty"`
	Machine        Machine          `json:"machine"`
	Stairs         []StairReport    `json:"stairs"`
	Sent           int64            `json:"sent"`
	Acked          int64            `json:"acked"`
	Unacked        int64            `json:"unacked"`
	LostOnClose    int64            `json:"unanswered_on_close"`
	Errors         map[string]int64 `json:"errors"`
	DuplicateAcks  int64            `json:"duplicate_acks"`
	ForeignFrames  int64            `json:"foreign_frames"`
	PushedMessages int64            `json:"pushed_messages"`
	InboxSockets   int              `json:"inbox_sockets,omitempty"` // operators watching (Config.Operators)
	InboxFrames    int64            `json:"inbox_message_frames,omitempty"`
	SocketsClosed  int64            `json:"sockets_closed_by_server"`
	SavedBefore    *float64         `json:"metrics_saved_before,omitempty"`
	SavedAfter     *float64         `json:"metrics_saved_after,omitempty"`
	SavedDelta     *float64         `json:"metrics_saved_delta,omitempty"`
	Notes          []string         `json:"notes,omitempty"`
}

// StairReport is one stair. Latencies are in milliseconds from each message's intended send
// time to its ack; rates and CPU cover the measured window (the stair minus its warm-up).
type StairReport struct {
	Stair         int              `json:"stair"`
	TargetRate    float64          `json:"target_rate"`
	WindowSeconds float64          `json:"window_seconds"`
	Sent          int64            `json:"sent"`
	Acked         int64            `json:"acked"`
	AckedRate     float64          `json:"acked_rate"`
	Latency       Latency          `json:"ack_latency_ms"`
	SendLagP99MS  float64          `json:"send_lag_p99_ms"`
	SendLagMaxMS  float64          `json:"send_lag_max_ms"`
	Errors        map[string]int64 `json:"errors"`
	Procs         []ProcReport     `json:"procs,omitempty"`
	Loadgen       ProcReport       `json:"loadgen"`
	// GeneratorBottleneck: the acked rate fell below 95 % of the target while the generator
	// used more than 90 % of a core, so the figures measure loadgen, not the edge.
	GeneratorBottleneck bool     `json:"generator_bottleneck"`
	SchedP99MS          *float64 `json:"edge_sched_latency_p99_ms,omitempty"`
	SchedMaxMS          *float64 `json:"edge_sched_latency_max_ms,omitempty"`
	// SchedP99AtLeast: the p99 fell past the histogram's highest finite bucket, so the figure
	// is a lower bound.
	SchedP99AtLeast bool     `json:"edge_sched_latency_p99_at_least,omitempty"`
	SavedInWindow   *float64 `json:"metrics_saved_in_window,omitempty"`
	// InboxFrames: message frames the operators' inboxes received from the stair's start
	// until its sending stopped (with operators watching).
	InboxFrames *int64       `json:"inbox_message_frames,omitempty"`
	Slack       *SlackReport `json:"slack,omitempty"`
	// GeneratorLate: messages left loadgen more than 10 ms (p99) after their intended time —
	// the generator's CPU was short (often: other work on the box), so latencies include that.
	GeneratorLate bool `json:"generator_late"`
	// CPUs: how each CPU of the machine spent the window (softirq is loopback network work
	// charged to no process; steal is the hypervisor's).
	CPUs     []procfs.CPUUse `json:"cpus,omitempty"`
	LoadAvg1 float64         `json:"load_avg_1m"` // of the machine at the end of the window
	loadAvg  float64
}

// Latency percentiles in milliseconds; Count is how many acks they cover.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// ProcReport is one process during a stair's window.
type ProcReport struct {
	Name            string   `json:"name"`
	PID             int      `json:"pid"`
	CPUPercent      *float64 `json:"cpu_percent,omitempty"`       // of one core
	CPUMicrosPerMsg *float64 `json:"cpu_us_per_msg,omitempty"`    // CPU time ÷ acks in the window
	RSSPeakMB       float64  `json:"rss_peak_mb,omitempty"`       // highest VmRSS sampled in the window
	HWMMB           float64  `json:"rss_high_water_mb,omitempty"` // VmHWM: peak since the process started
}

// SlackReport is what the Slack mock received.
type SlackReport struct {
	DeliveredInWindow int64   `json:"delivered_in_window"`
	DeliveredRate     float64 `json:"delivered_rate"`
	Expected          int64   `json:"expected_total"`  // acks so far in the run
	DeliveredTotal    int64   `json:"delivered_total"` // posts the mock got since the run began
	AllDelivered      bool    `json:"all_delivered"`
	DrainSeconds      float64 `json:"drain_seconds"` // after the stair, until every acked message was delivered
}

func (sr *StairReport) finish(st *stairStats) {
	sr.Sent = st.sent.Load()
	sr.Acked = st.acked.Load()
	h := newHist()
	for i := range st.lat {
		st.lat[i].Lock()
		h.Merge(st.lat[i].h)
		st.lat[i].Unlock()
	}
	sr.Latency = latency(h)
	lag := newHist()
	for _, l := range st.lag {
		lag.Merge(l)
	}
	sr.SendLagP99MS = ms(lag.ValueAtQuantile(99))
	sr.SendLagMaxMS = ms(lag.Max())
	sr.GeneratorLate = sr.SendLagP99MS > 10
	sr.LoadAvg1 = sr.loadAvg
	st.errMu.Lock()
	sr.Errors = make(map[string]int64, len(st.errs))
	for k, v := range st.errs {
		sr.Errors[k] = v
	}
	st.errMu.Unlock()
}

func latency(h *hdr.Histogram) Latency {
	return Latency{
		Count: h.TotalCount(),
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
		Mean:  float64(int64(h.Mean())) / 1000,
	}
}

func ms(us int64) float64 { return float64(us) / 1000 }

func (sr StairReport) oneLine() string {
	s := fmt.Sprintf("stair %d: target %.0f/s acked %.0f/s p50 %.2fms p99 %.2fms max %.1fms", sr.Stair, sr.TargetRate, sr.AckedRate, sr.Latency.P50, sr.Latency.P99, sr.Latency.Max)
	for _, p := range sr.Procs {
		s += " " + p.Name + " " + fmtPtr(p.CPUPercent, "%.0f%%") + " " + fmtPtr(p.CPUMicrosPerMsg, "%.1fµs/msg")
	}
	s += " loadgen " + fmtPtr(sr.Loadgen.CPUPercent, "%.0f%%")
	if n := sum(sr.Errors); n > 0 {
		s += fmt.Sprintf(" errors %d", n)
	}
	if sr.GeneratorBottleneck {
		s += " GENERATOR-BOUND"
	}
	if sr.GeneratorLate {
		s += fmt.Sprintf(" (generator late: send lag p99 %.1fms, load %.1f)", sr.SendLagP99MS, sr.LoadAvg1)
	}
	return s
}

func sum(m map[string]int64) int64 {
	var t int64
	for _, v := range m {
		t += v
	}
	return t
}

func fmtPtr(p *float64, f string) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf(f, *p)
}

// BrakeHint says why the edge answered rate_limited or braked, when it did: its brakes are
// on by default and a load test's sockets send faster than a visitor may ("": none of those).
func BrakeHint(errs map[string]int64) string {
	n := errs["rate_limited"] + errs["braked"]
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d messages were refused by the edge's brakes (rate_limited, braked), which are on by default: "+
		"to measure the edge rather than its brakes, start it with -conn-msg-rate 0 -site-msg-rate 0 -ip-conv-rate 0 -ip-socket-rate 0 -flood-threshold 0 "+
		"(loadgen compare does).", n)
}

// FormatErrors lists error counts by code, sorted: "braked:3 rate_limited:1", or "0".
func FormatErrors(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// WriteJSON writes the report as indented JSON to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// procNames lists the tracked processes in the order of the first stair.
func (r *Report) procNames() []string {
	var names []string
	if len(r.Stairs) > 0 {
		for _, p := range r.Stairs[0].Procs {
			names = append(names, p.Name)
		}
	}
	return names
}

func findProc(sr StairReport, name string) *ProcReport {
	for i := range sr.Procs {
		if sr.Procs[i].Name == name {
			return &sr.Procs[i]
		}
	}
	return nil
}

// columns returns the table's header and rows, shared by stdout and Markdown.
func (r *Report) columns() ([]string, [][]string) {
	head := []string{"target/s", "acked/s", "p50 ms", "p99 ms", "max ms", "errors"}
	names := r.procNames()
	for _, n := range names {
		head = append(head, n+" CPU%", n+" µs/msg", n+" RSS MB")
	}
	head = append(head, "edge sched p99 ms", "loadgen CPU%", "loadgen µs/msg")
	slack := false
	for _, s := range r.Stairs {
		if s.Slack != nil {
			slack = true
		}
	}
	if slack {
		head = append(head, "slack delivered/s", "drain s", "all delivered")
	}
	head = append(head, "note")
	var rows [][]string
	for _, s := range r.Stairs {
		row := []string{
			fmt.Sprintf("%.0f", s.TargetRate),
			fmt.Sprintf("%.0f", s.AckedRate),
			fmt.Sprintf("%.2f", s.Latency.P50),
			fmt.Sprintf("%.2f", s.Latency.P99),
			fmt.Sprintf("%.1f", s.Latency.Max),
			FormatErrors(s.Errors),
		}
		for _, n := range names {
			p := findProc(s, n)
			if p == nil {
				row = append(row, "n/a", "n/a", "n/a")
				continue
			}
			row = append(row, fmtPtr(p.CPUPercent, "%.0f"), fmtPtr(p.CPUMicrosPerMsg, "%.1f"), fmt.Sprintf("%.0f", p.RSSPeakMB))
		}
		sched := fmtPtr(s.SchedP99MS, "%.3f")
		if s.SchedP99AtLeast {
			sched = "≥" + sched
		}
		row = append(row, sched, fmtPtr(s.Loadgen.CPUPercent, "%.0f"), fmtPtr(s.Loadgen.CPUMicrosPerMsg, "%.1f"))
		if slack {
			if s.Slack != nil {
				row = append(row, fmt.Sprintf("%.0f", s.Slack.DeliveredRate), fmt.Sprintf("%.1f", s.Slack.DrainSeconds), fmt.Sprint(s.Slack.AllDelivered))
			} else {
				row = append(row, "n/a", "n/a", "n/a")
			}
		}
		var notes []string
		if s.GeneratorBottleneck {
			notes = append(notes, "generator-bound")
		}
		if s.GeneratorLate {
			notes = append(notes, fmt.Sprintf("generator late (send lag p99 %.1f ms, load %.1f)", s.SendLagP99MS, s.LoadAvg1))
		}
		note := strings.Join(notes, "; ")
		row = append(row, note)
		rows = append(rows, row)
	}
	return head, rows
}

// WriteTable prints the stairs as an aligned table.
func (r *Report) WriteTable(w io.Writer) {
	head, rows := r.columns()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "total: sent %d, acked %d, unacked %d, errors %s", r.Sent, r.Acked, r.Unacked, FormatErrors(r.Errors))
	if r.SavedDelta != nil {
		fmt.Fprintf(w, ", edge metrics saved +%.0f", *r.SavedDelta)
	}
	fmt.Fprintln(w)
	if h := BrakeHint(r.Errors); h != "" {
		fmt.Fprintln(w, h)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// Markdown renders the report for report.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	title := "loadgen run"
	if r.Setup != "" {
		title += ": " + r.Setup
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	fmt.Fprintf(&b, "- started %s against %s; %d sockets open of %d over %d sites; stairs of %s (first %s not measured), pacing tick %s\n",
		r.StartedAt.Format(time.RFC3339), r.Edge, r.SocketsOpen, r.Sockets, r.Sites, r.Step, r.Warmup, r.Tick)
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), kernel %s; loadgen on %d of them, GOMAXPROCS %d, %s\n", r.Machine.NumCPU, r.Machine.CPUModel, r.Machine.Kernel, r.Machine.AllowedCPUs, r.Machine.GOMAXPROCS, r.Machine.GoVersion)
	if r.EdgePID > 0 {
		fmt.Fprintf(&b, "- edge pid %d", r.EdgePID)
		if len(r.WorkerPIDs) > 0 {
			fmt.Fprintf(&b, ", worker pids %v", r.WorkerPIDs)
		}
		b.WriteString("\n")
	}
	b.WriteString("- latency: from each message's intended send time to its ack (HdrHistogram, coordinated-omission aware); CPU µs/msg = CPU time in the window ÷ acks in the window\n\n")
	head, rows := r.columns()
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	if len(r.Stairs) > 0 && len(r.Stairs[0].CPUs) > 1 {
		b.WriteString("\nHow each CPU spent the window (% user / system / softirq / steal / idle):\n\n| target/s |")
		for _, c := range r.Stairs[0].CPUs[1:] {
			b.WriteString(" " + c.CPU + " |")
		}
		b.WriteString("\n|---:|")
		for range r.Stairs[0].CPUs[1:] {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, s := range r.Stairs {
			fmt.Fprintf(&b, "| %.0f |", s.TargetRate)
			for i := 1; i < len(s.CPUs); i++ {
				c := s.CPUs[i]
				fmt.Fprintf(&b, " %.0f / %.0f / %.0f / %.0f / %.0f |", c.User, c.System, c.SoftIRQ, c.Steal, c.Idle)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "\nTotal: sent %d, acked %d, unacked %d, errors %s.", r.Sent, r.Acked, r.Unacked, FormatErrors(r.Errors))
	if r.SavedDelta != nil {
		fmt.Fprintf(&b, " The edge's `spookat_messages_saved_total` rose by %.0f.", *r.SavedDelta)
	}
	if h := BrakeHint(r.Errors); h != "" {
		b.WriteString(" " + h)
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n> %s\n", n)
	}
	return b.String()
}
