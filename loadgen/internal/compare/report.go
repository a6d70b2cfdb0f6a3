package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"spookat/loadgen/internal/proc"
	"spookat/loadgen/internal/stairs"
)

// P99Limit is the latency bar of issue 4's targets.
const P99Limit = 50.0 // ms

func waitTCP(ctx context.Context, p *proc.Proc, addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited at start: %v", p.Name, p.Err())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: nothing listens on %s after 20s", p.Name, addr)
}

// SelfPinning says which CPUs this process may run on.
func SelfPinning() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return "CPUs " + strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// proc0 is a stair's figures of the process called name ("edge" is also a peer setup's
// server).
func proc0(s stairs.StairReport, name string) *stairs.ProcReport {
	for i := range s.Procs {
		n := s.Procs[i].Name
		if n == name || name == "worker" && strings.HasPrefix(n, "worker") || name == "edge" && n == "peer" {
			return &s.Procs[i]
		}
	}
	return nil
}

func f(p *float64, format string) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf(format, *p)
}

func sched(s stairs.StairReport) string {
	v := f(s.SchedP99MS, "%.3f")
	if s.SchedP99AtLeast {
		v = "≥" + v
	}
	return v
}

// good reports whether a stair met the bar: p99 within the limit, acked ≥ 95 % of the target,
// no errors, and with Slack every acked message delivered.
func good(s stairs.StairReport, slack bool) bool {
	ok := s.Latency.P99 <= P99Limit && s.AckedRate >= 0.95*s.TargetRate && len(s.Errors) == 0
	if slack {
		ok = ok && s.Slack != nil && s.Slack.AllDelivered
	}
	return ok
}

func summarize(r *Report) []string {
	var out []string
	byName := map[runKey]*Result{}
	for i := range r.Results {
		res := &r.Results[i]
		byName[runKey{res.Setup.Name, res.Round}] = res
		if res.Skipped {
			out = append(out, fmt.Sprintf("%s: SKIPPED (%s)", res.Label(), res.Error))
			continue
		}
		if res.Report == nil {
			out = append(out, fmt.Sprintf("%s: no result (%s)", res.Label(), res.Error))
			continue
		}
		best := 0.0
		for _, s := range res.Report.Stairs {
			if good(s, res.Setup.Slack) {
				best = math.Max(best, s.TargetRate)
			}
		}
		what := "p99 ≤ 50 ms, no errors"
		if res.Setup.Slack {
			what = "every message delivered, p99 ≤ 50 ms, no errors"
		}
		if best > 0 {
			out = append(out, fmt.Sprintf("%s: highest stair with %s: %.0f/s", res.Label(), what, best))
		} else {
			out = append(out, fmt.Sprintf("%s: no stair with %s", res.Label(), what))
		}
	}
	for round := range r.Rounds + 1 {
		out = append(out, oneOverTwo(byName, round)...)
		out = append(out, inboxCost(byName, round)...)
	}
	if r.Rounds > 1 {
		out = append(out, inboxMedians(byName, r.Rounds)...)
	}
	return out
}

// roundPrefix begins a sentence about one round's results ("" when the compare ran once).
func roundPrefix(round int) string {
	if round == 0 {
		return ""
	}
	return fmt.Sprintf("round %d: ", round)
}

// runKey finds a result by its setup and round.
type runKey struct {
	setup string
	round int
}

// oneOverTwo compares the two-process setups with the one-process ones of the same round.
func oneOverTwo(byName map[runKey]*Result, round int) []string {
	var out []string
	for _, pair := range [][2]string{{"one-process", "two-process"}, {"one-process+slack", "two-process+slack"}} {
		one, two := byName[runKey{pair[0], round}], byName[runKey{pair[1], round}]
		if one == nil || two == nil || one.Report == nil || two.Report == nil {
			continue
		}
		var better, worse, same []string
		for _, s2 := range two.Report.Stairs {
			for _, s1 := range one.Report.Stairs {
				if s1.TargetRate != s2.TargetRate {
					continue
				}
				e1, e2 := proc0(s1, "edge"), proc0(s2, "edge")
				// Figures in the sentence's order: two-process first, one-process second.
				line := fmt.Sprintf("%.0f/s (p99 %.2f vs %.2f ms", s1.TargetRate, s2.Latency.P99, s1.Latency.P99)
				if e1 != nil && e2 != nil && e1.CPUMicrosPerMsg != nil && e2.CPUMicrosPerMsg != nil {
					line += fmt.Sprintf(", edge %.1f vs %.1f µs/msg", *e2.CPUMicrosPerMsg, *e1.CPUMicrosPerMsg)
				}
				line += ")"
				g1, g2 := good(s1, one.Setup.Slack), good(s2, two.Setup.Slack)
				switch {
				case g2 && !g1 || g1 == g2 && s2.Latency.P99 < 0.9*s1.Latency.P99:
					better = append(better, line)
				case g1 && !g2 || g1 == g2 && s2.Latency.P99 > 1.1*s1.Latency.P99:
					worse = append(worse, line)
				default:
					same = append(same, line)
				}
			}
		}
		pre := roundPrefix(round)
		if len(better) > 0 {
			out = append(out, fmt.Sprintf("%s%s is better than %s at %s", pre, pair[1], pair[0], strings.Join(better, "; ")))
		}
		if len(same) > 0 {
			out = append(out, fmt.Sprintf("%s%s and %s are within 10 %% at %s", pre, pair[1], pair[0], strings.Join(same, "; ")))
		}
		if len(worse) > 0 {
			out = append(out, fmt.Sprintf("%s%s is worse than %s at %s", pre, pair[1], pair[0], strings.Join(worse, "; ")))
		}
	}
	return out
}

// inboxStairs calls fn for each stair that the inbox setup w and its setup without inboxes
// both measured in round, with the edge's CPU a message in each.
func inboxStairs(byName map[runKey]*Result, w Setup, round int, fn func(with, without stairs.StairReport, us1, us0 float64)) {
	with, without := byName[runKey{w.Name, round}], byName[runKey{strings.TrimSuffix(w.Name, "+inbox"), round}]
	if with == nil || without == nil || with.Report == nil || without.Report == nil {
		return
	}
	for _, s1 := range with.Report.Stairs {
		for _, s0 := range without.Report.Stairs {
			e1, e0 := proc0(s1, "edge"), proc0(s0, "edge")
			if s1.TargetRate != s0.TargetRate || e1 == nil || e0 == nil || e1.CPUMicrosPerMsg == nil || e0.CPUMicrosPerMsg == nil {
				continue
			}
			fn(s1, s0, *e1.CPUMicrosPerMsg, *e0.CPUMicrosPerMsg)
		}
	}
}

// inboxCost says what operators watching add to the edge's cost per message, stair by stair.
func inboxCost(byName map[runKey]*Result, round int) []string {
	var out []string
	for _, w := range InboxSetups {
		var parts []string
		inboxStairs(byName, w, round, func(s1, s0 stairs.StairReport, us1, us0 float64) {
			parts = append(parts, fmt.Sprintf("%.0f/s %+.0f %% (%.1f vs %.1f µs/msg, p99 %.2f vs %.2f ms)", s1.TargetRate,
				100*(us1/us0-1), us1, us0, s1.Latency.P99, s0.Latency.P99))
		})
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%s%d inboxes watching (%s) cost the edge per message: %s", roundPrefix(round), w.Inboxes, w.Name, strings.Join(parts, "; ")))
		}
	}
	return out
}

// inboxMedians is each stair's median over the rounds of what the inboxes cost.
func inboxMedians(byName map[runKey]*Result, rounds int) []string {
	var out []string
	for _, w := range InboxSetups {
		costs := map[float64][]float64{}
		var rates []float64
		for round := 1; round <= rounds; round++ {
			inboxStairs(byName, w, round, func(s1, _ stairs.StairReport, us1, us0 float64) {
				if costs[s1.TargetRate] == nil {
					rates = append(rates, s1.TargetRate)
				}
				costs[s1.TargetRate] = append(costs[s1.TargetRate], us1/us0-1)
			})
		}
		var parts []string
		for _, rate := range rates {
			parts = append(parts, fmt.Sprintf("%.0f/s %+.0f %% (of %d rounds)", rate, 100*median(costs[rate]), len(costs[rate])))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("median over the rounds: %d inboxes watching (%s) cost the edge per message: %s", w.Inboxes, w.Name, strings.Join(parts, "; ")))
		}
	}
	return out
}

// median of vs (which it sorts); NaN for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// Ratio is an edge setup's figures over a peer setup's at one stair: below 1 the edge does
// better.
type Ratio struct {
	Edge string  `json:"edge_setup"`
	Peer string  `json:"peer_setup"`
	Rate float64 `json:"target_rate"`
	// Round: both setups' round (Config.Rounds); 0 in a compare run once and in the medians.
	Round int `json:"round,omitempty"`
	// Of: in the medians, how many rounds' ratios the median is of.
	Of int `json:"of_rounds,omitempty"`
	// CPU is µs per message, edge ÷ peer; WithWorker adds the worker's to the edge's
	// (two-process setups).
	CPU        *float64 `json:"cpu_us_per_msg,omitempty"`
	WithWorker *float64 `json:"cpu_us_per_msg_with_worker,omitempty"`
	P99        *float64 `json:"p99,omitempty"`
	RSS        *float64 `json:"rss_peak,omitempty"`
}

func ratio(a, b float64) *float64 {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return nil
	}
	v := a / b
	return &v
}

// ratios pairs every edge setup with every peer setup of the same Slack-ness and round, stair
// by stair.
func ratios(r *Report) []Ratio {
	var out []Ratio
	for _, e := range r.Results {
		if e.Setup.Peer || e.Report == nil {
			continue
		}
		for _, p := range r.Results {
			if !p.Setup.Peer || p.Report == nil || p.Setup.Slack != e.Setup.Slack || p.Round != e.Round {
				continue
			}
			for _, se := range e.Report.Stairs {
				for _, sp := range p.Report.Stairs {
					if se.TargetRate != sp.TargetRate {
						continue
					}
					q := Ratio{Edge: e.Setup.Name, Peer: p.Setup.Name, Rate: se.TargetRate, Round: e.Round, P99: ratio(se.Latency.P99, sp.Latency.P99)}
					ee, pe, w := proc0(se, "edge"), proc0(sp, "edge"), proc0(se, "worker")
					if ee != nil && pe != nil {
						q.RSS = ratio(ee.RSSPeakMB, pe.RSSPeakMB)
						if ee.CPUMicrosPerMsg != nil && pe.CPUMicrosPerMsg != nil {
							q.CPU = ratio(*ee.CPUMicrosPerMsg, *pe.CPUMicrosPerMsg)
							if w != nil && w.CPUMicrosPerMsg != nil {
								q.WithWorker = ratio(*ee.CPUMicrosPerMsg+*w.CPUMicrosPerMsg, *pe.CPUMicrosPerMsg)
							}
						}
					}
					out = append(out, q)
				}
			}
		}
	}
	return out
}

// medians is, for each edge setup, peer setup and stair, the median of its rounds' ratios
// (nil when the compare ran once).
func medians(qs []Ratio, rounds int) []Ratio {
	if rounds < 2 {
		return nil
	}
	type key struct {
		edge, peer string
		rate       float64
	}
	var order []key
	groups := map[key][]Ratio{}
	for _, q := range qs {
		k := key{q.Edge, q.Peer, q.Rate}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], q)
	}
	var out []Ratio
	for _, k := range order {
		g := groups[k]
		m := Ratio{Edge: k.edge, Peer: k.peer, Rate: k.rate, Of: len(g)}
		for _, field := range []struct {
			dst *(*float64)
			get func(Ratio) *float64
		}{
			{&m.CPU, func(q Ratio) *float64 { return q.CPU }},
			{&m.WithWorker, func(q Ratio) *float64 { return q.WithWorker }},
			{&m.P99, func(q Ratio) *float64 { return q.P99 }},
			{&m.RSS, func(q Ratio) *float64 { return q.RSS }},
		} {
			var vs []float64
			for _, q := range g {
				if v := field.get(q); v != nil {
					vs = append(vs, *v)
				}
			}
			if len(vs) > 0 {
				v := median(vs)
				*field.dst = &v
			}
		}
		out = append(out, m)
	}
	return out
}

// WriteJSON writes the report.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Markdown is the comparison as the seed's round three laid it out: setup × rate.
func (r *Report) Markdown(chart string) string {
	var b strings.Builder
	b.WriteString("# loadgen compare: one process vs two, without and with the Slack mock, and a peer\n\n")
	fmt.Fprintf(&b, "- %s; started %s\n", r.Machine, r.StartedAt.Format(time.RFC3339))
	fmt.Fprintf(&b, "- %d sockets over %d sites, stairs %v msg/s of %s each; generator pinned to %s\n", r.Sockets, r.Sites, r.Stairs, r.Step, r.Generator)
	for _, res := range r.Results {
		fmt.Fprintf(&b, "- %s: %s", res.Label(), res.Pinned)
		if res.Skipped {
			fmt.Fprintf(&b, " — **SKIPPED**: %s", res.Error)
		} else if res.Error != "" {
			fmt.Fprintf(&b, " — error: %s", res.Error)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| setup | target/s | acked/s | p50 ms | p99 ms | max ms | server CPU % | server µs/msg | worker CPU % | worker µs/msg | worker µs/post | server RSS MB | server sched p99 ms | delivered/s | drain s | all delivered | errors | loadgen CPU % |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range r.Results {
		if res.Report == nil {
			continue
		}
		for _, s := range res.Report.Stairs {
			e, w := proc0(s, "edge"), proc0(s, "worker")
			var ecpu, eus, wcpu, wus, wpost *float64
			rss := "–"
			if e != nil {
				ecpu, eus = e.CPUPercent, e.CPUMicrosPerMsg
				rss = fmt.Sprintf("%.0f", e.RSSPeakMB)
			}
			if w != nil {
				wcpu, wus = w.CPUPercent, w.CPUMicrosPerMsg
			}
			del, drain, all := "–", "–", "–"
			if s.Slack != nil {
				if wcpu != nil && s.Slack.DeliveredRate > 0 {
					// CPU % of one core is 10⁴ µs a second, over the posts delivered a second.
					v := *wcpu * 1e4 / s.Slack.DeliveredRate
					wpost = &v
				}
				del = fmt.Sprintf("%.0f", s.Slack.DeliveredRate)
				drain = fmt.Sprintf("%.1f", s.Slack.DrainSeconds)
				all = fmt.Sprint(s.Slack.AllDelivered)
			}
			note := ""
			if s.GeneratorBottleneck {
				note = " (generator-bound)"
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f | %.2f | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%s |\n",
				res.Label(), s.TargetRate, s.AckedRate, s.Latency.P50, s.Latency.P99, s.Latency.Max,
				f(ecpu, "%.0f"), f(eus, "%.1f"), f(wcpu, "%.0f"), f(wus, "%.1f"), f(wpost, "%.1f"), rss, sched(s),
				del, drain, all, stairs.FormatErrors(s.Errors), f(s.Loadgen.CPUPercent, "%.0f"), note)
		}
	}
	b.WriteString("\nThe server is the edge, or in the peer setups the peer's one process. CPU % is of one core; µs/msg is CPU time over the measured window ÷ messages acked in it; the worker's µs/post is its CPU ÷ the posts delivered (a worker behind its backlog posts fewer than were acked). In the one-process setups the edge's figure includes the in-process worker and the embedded NATS server.\n")
	if len(r.Ratios) > 0 {
		b.WriteString("\n## Edge ÷ peer\n\nEach edge setup's figure divided by the peer's at the same stair (below 1: the edge does better). With a worker, \"+ worker\" adds its CPU to the edge's.\n\n")
		b.WriteString("| edge setup | peer setup | target/s | µs/msg | µs/msg + worker | p99 | RSS |\n|---|---|---:|---:|---:|---:|---:|\n")
		for _, q := range r.Ratios {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s |\n", label(q.Edge, q.Round), label(q.Peer, q.Round), q.Rate,
				f(q.CPU, "%.2f"), f(q.WithWorker, "%.2f"), f(q.P99, "%.2f"), f(q.RSS, "%.2f"))
		}
	}
	if len(r.Medians) > 0 {
		fmt.Fprintf(&b, "\n## Edge ÷ peer, the median over %d rounds\n\nEach round ran every setup once, in the opposite order to the round before; a ratio is taken within a round, then its median over the rounds.\n\n", r.Rounds)
		b.WriteString("| edge setup | peer setup | target/s | rounds | µs/msg | µs/msg + worker | p99 | RSS |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, q := range r.Medians {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %d | %s | %s | %s | %s |\n", q.Edge, q.Peer, q.Rate, q.Of,
				f(q.CPU, "%.2f"), f(q.WithWorker, "%.2f"), f(q.P99, "%.2f"), f(q.RSS, "%.2f"))
		}
	}
	if chart != "" {
		fmt.Fprintf(&b, "\n![p99 against rate](%s)\n", chart)
	}
	b.WriteString("\n## Summary\n\n")
	for _, s := range r.Summary {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	return b.String()
}

// SVG draws p99 against rate, one line per setup, log-scaled p99 with the 50 ms bar.
func (r *Report) SVG() string {
	const W, H, L, R, T, B = 720, 420, 70, 190, 30, 50
	pw, ph := float64(W-L-R), float64(H-T-B)
	maxRate := 0.0
	minP, maxP := math.Inf(1), 0.0
	for _, res := range r.Results {
		if res.Report == nil {
			continue
		}
		for _, s := range res.Report.Stairs {
			maxRate = math.Max(maxRate, s.TargetRate)
			if s.Latency.P99 > 0 {
				minP = math.Min(minP, s.Latency.P99)
				maxP = math.Max(maxP, s.Latency.P99)
			}
		}
	}
	if maxRate == 0 || maxP == 0 {
		return ""
	}
	maxP = math.Max(maxP, P99Limit*2)
	lo := math.Pow(10, math.Floor(math.Log10(math.Max(minP, 0.01))))
	hi := math.Pow(10, math.Ceil(math.Log10(maxP)))
	x := func(rate float64) float64 { return float64(L) + pw*rate/maxRate }
	y := func(p float64) float64 {
		p = math.Max(p, lo)
		return float64(T) + ph*(1-(math.Log10(p)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">ack latency p99 against rate</text>`+"\n", L)
	for d := lo; d <= hi*1.0001; d *= 10 {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g ms</text>`+"\n", L, y(d), W-R, y(d), L-6, y(d)+4, d)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c00" stroke-dasharray="4 3"/><text x="%d" y="%.1f" fill="#c00">50 ms</text>`+"\n", L, y(P99Limit), W-R, y(P99Limit), W-R+4, y(P99Limit)+4)
	for _, rate := range r.Stairs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(rate), T, x(rate), H-B, x(rate), H-B+16, rate)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">messages / s</text>`+"\n", float64(L)+pw/2, H-12)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", L, T, pw, ph)
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"}
	i := 0
	for _, res := range r.Results {
		if res.Report == nil || len(res.Report.Stairs) == 0 {
			continue
		}
		c := colors[i%len(colors)]
		var pts []string
		for _, s := range res.Report.Stairs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.TargetRate), y(s.Latency.P99)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], c)
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n", W-R+10, T+20+18*i, W-R+30, T+20+18*i, c, W-R+34, T+24+18*i, res.Label())
		i++
	}
	b.WriteString("</svg>\n")
	return b.String()
}
