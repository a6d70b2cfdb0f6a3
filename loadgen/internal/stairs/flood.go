package stairs

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"spookat/loadgen/internal/pace"
)

// FloodConfig is the seed's flood test: one site gets new visitors at a steady pace (each
// opens a socket and starts a conversation) while the other sites carry steady traffic.
type FloodConfig struct {
	Base           Config        // the other sites' traffic: Keys, Sockets, EdgeURL, PIDs…; Stairs and Step are set from Rate and Duration
	FloodKey       string        // the flooded site
	Rate           float64       // messages/s over the other sites (seed: 200)
	Duration       time.Duration // seed: 90 s
	VisitorsPerSec float64       // new visitors a second on the flooded site (seed: 5)
	Baseline       bool          // first run the same traffic without the flood, to compare
}

// FloodSide is what happened to the flooded site's visitors.
type FloodSide struct {
	Visitors       int64            `json:"visitors"`         // new visitors attempted
	Connected      int64            `json:"connected"`        // sockets upgraded
	RefusedHTTP    map[string]int64 `json:"refused_http"`     // upgrades refused, by HTTP status
	Admitted       int64            `json:"admitted"`         // first messages acked
	Rejected       map[string]int64 `json:"rejected"`         // first messages refused, by error code
	NoAnswer       int64            `json:"no_answer"`        // neither ack nor error within 10 s, or the socket broke
	RejectedShare  float64          `json:"rejected_share"`   // (refused + rejected) ÷ (admitted + refused + rejected)
	AdmittedPer10s []int64          `json:"admitted_per_10s"` // admissions in each 10 s of the flood: the brake's levels
}

// FloodReport compares the other sites with and without the flood.
type FloodReport struct {
	Baseline       *Report   `json:"baseline,omitempty"`
	Flood          *Report   `json:"flood"`
	Flooded        FloodSide `json:"flooded_site"`
	OthersP99      float64   `json:"others_p99_ms"`
	OthersP99Base  *float64  `json:"others_p99_ms_baseline,omitempty"`
	OthersP99Delta *float64  `json:"others_p99_change_percent,omitempty"`
	OthersErrors   int64     `json:"others_errors"`
	// Targets of issue 4: ≥ 85 % of the flood rejected; others' p99 within 20 % of the
	// baseline and no errors.
	RejectedOK bool `json:"target_rejected_ok"`
	P99OK      bool `json:"target_p99_ok"`
	ErrorsOK   bool `json:"target_errors_ok"`
}

// Flood runs the flood test (and first the baseline, if asked).
func Flood(ctx context.Context, fc FloodConfig) (*FloodReport, error) {
	if fc.FloodKey == "" {
		return nil, fmt.Errorf("flood: no flooded site")
	}
	if fc.Rate <= 0 {
		fc.Rate = 200
	}
	if fc.Duration <= 0 {
		fc.Duration = 90 * time.Second
	}
	if fc.VisitorsPerSec <= 0 {
		fc.VisitorsPerSec = 5
	}
	base := fc.Base
	base.Stairs = []float64{fc.Rate}
	base.Step = fc.Duration
	if err := base.defaults(); err != nil {
		return nil, err
	}
	out := &FloodReport{}
	if fc.Baseline {
		b := base
		b.Setup = "baseline (no flood)"
		fmt.Fprintf(b.Log, "loadgen: flood baseline: %.0f msg/s over %d sites for %v\n", fc.Rate, len(b.Keys), fc.Duration)
		rep, err := Run(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		out.Baseline = rep
	}
	f := base
	f.Setup = fmt.Sprintf("flood (%.0f new visitors/s on one site)", fc.VisitorsPerSec)
	fl := &flooder{cfg: fc, edge: base.EdgeURL, origin: base.Origin, log: base.Log, refused: map[string]int64{}, rejected: map[string]int64{}}
	var wg sync.WaitGroup
	f.OnStair = func(j int, start, end time.Time) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fl.run(ctx, start, end)
		}()
	}
	fmt.Fprintf(f.Log, "loadgen: flood: %.0f msg/s over %d sites, %.0f new visitors/s on site %s, for %v\n", fc.Rate, len(f.Keys), fc.VisitorsPerSec, fc.FloodKey, fc.Duration)
	rep, err := Run(ctx, f)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("flood: %w", err)
	}
	out.Flood = rep
	out.Flooded = fl.side()

	if len(rep.Stairs) > 0 {
		out.OthersP99 = rep.Stairs[0].Latency.P99
	}
	out.OthersErrors = sum(rep.Errors)
	out.ErrorsOK = out.OthersErrors == 0
	out.RejectedOK = out.Flooded.RejectedShare >= 0.85
	out.P99OK = true
	if out.Baseline != nil && len(out.Baseline.Stairs) > 0 {
		b := out.Baseline.Stairs[0].Latency.P99
		out.OthersP99Base = &b
		if b > 0 {
			d := 100 * (out.OthersP99 - b) / b
			out.OthersP99Delta = &d
			out.P99OK = d <= 20
		}
	}
	return out, nil
}

type flooder struct {
	cfg               FloodConfig
	edge, origin      string
	log               io.Writer
	visitors, conns   atomic.Int64
	admitted, noans   atomic.Int64
	mu                sync.Mutex
	refused, rejected map[string]int64
	admittedAt        []int64
}

func (fl *flooder) run(ctx context.Context, start, end time.Time) {
	u, err := url.Parse(fl.edge)
	if err != nil {
		return
	}
	u.Scheme = strings.Replace(strings.Replace(u.Scheme, "https", "wss", 1), "http", "ws", 1)
	u.Path = "/v1/widget/ws"
	u.RawQuery = url.Values{"site": {fl.cfg.FloodKey}}.Encode()
	target := u.String()
	slots := int(math.Ceil(end.Sub(start).Seconds() / 10))
	fl.admittedAt = make([]int64, slots)
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}
	hdr := http.Header{"Origin": {fl.origin}}
	runID := randomID(4)
	p := pace.NewPacer(pace.Schedule{Start: start, Rate: fl.cfg.VisitorsPerSec, Tick: 10 * time.Millisecond}, end)
	defer p.Stop()
	var wg sync.WaitGroup
	for {
		b, ok := p.Next(ctx.Done())
		if !ok {
			break
		}
		for i := b.From; i < b.To; i++ {
			fl.visitors.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				fl.visit(ctx, d, target, hdr, runID+"-f-"+strconv.FormatInt(i, 36), start)
			}()
		}
	}
	wg.Wait()
}

func (fl *flooder) visit(ctx context.Context, d *websocket.Dialer, target string, hdr http.Header, clientID string, start time.Time) {
	c, resp, err := d.DialContext(ctx, target, hdr)
	if err != nil {
		key := "dial_error"
		if resp != nil {
			key = strconv.Itoa(resp.StatusCode)
			resp.Body.Close()
		}
		fl.mu.Lock()
		fl.refused[key]++
		fl.mu.Unlock()
		return
	}
	defer c.Close()
	fl.conns.Add(1)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, hello, err := c.ReadMessage(); err != nil || frameType(hello) != kindHello {
		fl.noans.Add(1)
		return
	}
	frame := appendMessageFrame(nil, []byte(clientID), 0, []byte("Hi, anyone there? (flood)"))
	if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
		fl.noans.Add(1)
		return
	}
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			fl.noans.Add(1)
			return
		}
		switch frameType(msg) {
		case kindAck:
			fl.admitted.Add(1)
			slot := int(time.Since(start) / (10 * time.Second))
			fl.mu.Lock()
			if slot >= 0 && slot < len(fl.admittedAt) {
				fl.admittedAt[slot]++
			}
			fl.mu.Unlock()
			return
		case kindError:
			code, _, _ := jsonField(msg, "code")
			fl.mu.Lock()
			fl.rejected[string(code)]++
			fl.mu.Unlock()
			return
		}
	}
}

func (fl *flooder) side() FloodSide {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	s := FloodSide{
		Visitors:       fl.visitors.Load(),
		Connected:      fl.conns.Load(),
		RefusedHTTP:    fl.refused,
		Admitted:       fl.admitted.Load(),
		Rejected:       fl.rejected,
		NoAnswer:       fl.noans.Load(),
		AdmittedPer10s: fl.admittedAt,
	}
	no := sum(s.RefusedHTTP) + sum(s.Rejected)
	if all := no + s.Admitted; all > 0 {
		s.RejectedShare = float64(no) / float64(all)
	}
	return s
}

// Markdown renders the flood report.
func (fr *FloodReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# loadgen flood\n\n")
	fs := fr.Flooded
	fmt.Fprintf(&b, "Flooded site: %d new visitors, %d admitted, %d rejected at the upgrade (%s), %d rejected in the socket (%s), %d without an answer: **%.1f %% of the flood rejected** (target ≥ 85 %%: %s).\n\n",
		fs.Visitors, fs.Admitted, sum(fs.RefusedHTTP), FormatErrors(fs.RefusedHTTP), sum(fs.Rejected), FormatErrors(fs.Rejected), fs.NoAnswer, 100*fs.RejectedShare, okStr(fr.RejectedOK))
	if len(fs.AdmittedPer10s) > 0 {
		parts := make([]string, len(fs.AdmittedPer10s))
		for i, v := range fs.AdmittedPer10s {
			parts[i] = strconv.FormatInt(v, 10)
		}
		fmt.Fprintf(&b, "Admitted per 10 s of flood (the brake stepping up): %s.\n\n", strings.Join(parts, ", "))
	}
	b.WriteString("| other sites | p50 ms | p99 ms | max ms | acked/s | errors |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, r *Report) {
		if r == nil || len(r.Stairs) == 0 {
			return
		}
		s := r.Stairs[0]
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.1f | %.0f | %s |\n", name, s.Latency.P50, s.Latency.P99, s.Latency.Max, s.AckedRate, FormatErrors(r.Errors))
	}
	row("without flood", fr.Baseline)
	row("with flood", fr.Flood)
	b.WriteString("\n")
	if fr.OthersP99Delta != nil {
		fmt.Fprintf(&b, "Other sites' p99 changed by %+.1f %% under the flood (target within 20 %%: %s); errors %d (target 0: %s).\n", *fr.OthersP99Delta, okStr(fr.P99OK), fr.OthersErrors, okStr(fr.ErrorsOK))
	} else {
		fmt.Fprintf(&b, "No baseline run; other sites' errors %d (target 0: %s).\n", fr.OthersErrors, okStr(fr.ErrorsOK))
	}
	return b.String()
}

func okStr(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
