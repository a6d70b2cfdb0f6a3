package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"spookat/loadgen/internal/procfs"
	"spookat/loadgen/internal/stairs"
)

// runFlags are the flags `run` shares with `flood` and `compare`.
type runFlags struct {
	edge, edgeMetrics, edgeBin, data, sitesFile, slackToken, slackMock string
	sites, sockets, senders, textBytes, operators                      int
	stairs                                                             string
	step, warmup, drain, tick                                          time.Duration
	edgePID                                                            int
	workerPIDs                                                         string
	out, md                                                            string
	cpuProfile                                                         string
}

func (f *runFlags) register(fs *flag.FlagSet, stairsDefault string) {
	fs.StringVar(&f.edge, "edge", "http://127.0.0.1:8080", "the edge's base URL")
	fs.StringVar(&f.edgeMetrics, "edge-metrics", "http://127.0.0.1:9102/metrics", "the edge's /metrics (its -metrics-addr; an edge older than that flag: <-edge>/metrics)")
	fs.StringVar(&f.edgeBin, "edge-bin", "bin/edge", "the edge binary, used to seed sites")
	fs.StringVar(&f.data, "data", "data", "the edge's data directory (edge seed writes the sites there)")
	fs.IntVar(&f.sites, "sites", 1200, "sites to seed")
	fs.StringVar(&f.sitesFile, "sites-file", "", "use the sites in this file (the JSON that 'edge seed -json' prints) instead of seeding")
	fs.StringVar(&f.slackToken, "slack-token", "", "seed every site with Slack delivery using this bot token (default: xoxb-loadgen when -slack-mock is set)")
	fs.StringVar(&f.slackMock, "slack-mock", "", "base URL of the Slack mock, to count deliveries per stair")
	fs.IntVar(&f.sockets, "sockets", 1000, "widget websockets, spread over the sites")
	fs.IntVar(&f.operators, "operators", 0, "operators (added with edge operator add) whose inbox websockets stay open during the run, together watching every site the sockets write to")
	fs.StringVar(&f.stairs, "stairs", stairsDefault, "aggregate rates in messages/s, comma separated")
	fs.DurationVar(&f.step, "step", 60*time.Second, "length of each stair")
	fs.DurationVar(&f.warmup, "warmup", 2*time.Second, "start of each stair left out of the figures")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "how long to wait for outstanding acks (and the Slack backlog) after a stair")
	fs.DurationVar(&f.tick, "tick", time.Millisecond, "pacing interval: messages are released in batches on this tick")
	fs.IntVar(&f.senders, "senders", 4, "sender goroutines (each owns a share of the sockets)")
	fs.IntVar(&f.textBytes, "text-bytes", 48, "length of each message's text")
	fs.IntVar(&f.edgePID, "edge-pid", 0, "the edge's pid (default: the process listening on the -edge port)")
	fs.StringVar(&f.workerPIDs, "worker-pids", "", "worker pids, comma separated, or \"auto\" for every process named worker")
	fs.StringVar(&f.out, "out", "report.json", "JSON report path (empty: none)")
	fs.StringVar(&f.md, "md", "report.md", "Markdown report path (empty: none)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write loadgen's own CPU profile here (to see where the generator spends)")
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad rate %q in -stairs", p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-stairs is empty")
	}
	return out, nil
}

func parsePIDs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if s == "auto" {
		return procfs.FindByName("worker"), nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad pid %q", p)
		}
		out = append(out, v)
	}
	return out, nil
}

// edgePort is the TCP port of the edge URL.
func edgePort(edge string) (int, error) {
	u, err := url.Parse(edge)
	if err != nil {
		return 0, err
	}
	if p := u.Port(); p != "" {
		return strconv.Atoi(p)
	}
	if u.Scheme == "https" {
		return 443, nil
	}
	return 80, nil
}

// config turns the flags into a stairs.Config, seeding unless -sites-file is given.
func (f *runFlags) config(ctx context.Context) (stairs.Config, error) {
	var cfg stairs.Config
	rates, err := parseRates(f.stairs)
	if err != nil {
		return cfg, err
	}
	workers, err := parsePIDs(f.workerPIDs)
	if err != nil {
		return cfg, err
	}
	var sites []stairs.Site
	if f.sitesFile != "" {
		sites, err = stairs.LoadSites(f.sitesFile)
	} else {
		tok := f.slackToken
		if tok == "" && f.slackMock != "" {
			tok = "xoxb-loadgen"
		}
		t0 := time.Now()
		sites, err = stairs.Seed(ctx, f.edgeBin, f.data, f.sites, tok)
		if err == nil {
			fmt.Fprintf(os.Stderr, "loadgen: seeded %d sites in %.1fs\n", len(sites), time.Since(t0).Seconds())
		}
	}
	if err != nil {
		return cfg, err
	}
	var ops []stairs.Operator
	if f.operators > 0 {
		if ops, err = stairs.SeedOperators(ctx, f.edgeBin, f.data, stairs.Keys(sites), f.sockets, f.operators); err != nil {
			return cfg, err
		}
	}
	pid := f.edgePID
	if pid == 0 {
		if port, err := edgePort(f.edge); err == nil {
			if p, err := procfs.FindListener(port); err == nil {
				pid = p
			} else {
				fmt.Fprintf(os.Stderr, "loadgen: edge pid not found (%v); no edge CPU figures (use -edge-pid)\n", err)
			}
		}
	}
	return stairs.Config{
		Page:       true, // an edge: it closes a socket that says nothing after its hello
		EdgeURL:    f.edge,
		MetricsURL: f.edgeMetrics,
		Keys:       stairs.Keys(sites),
		Sockets:    f.sockets,
		Stairs:     rates,
		Step:       f.step,
		Warmup:     f.warmup,
		Drain:      f.drain,
		Tick:       f.tick,
		Senders:    f.senders,
		TextBytes:  f.textBytes,
		EdgePID:    pid,
		WorkerPIDs: workers,
		SlackMock:  f.slackMock,
		Operators:  ops,
		Log:        os.Stderr,
	}, nil
}

func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

func writeReport(rep *stairs.Report, jsonPath, mdPath string) error {
	rep.WriteTable(os.Stdout)
	if jsonPath != "" {
		if err := rep.WriteJSON(jsonPath); err != nil {
			return err
		}
	}
	if mdPath != "" {
		if err := os.WriteFile(mdPath, []byte(rep.Markdown()), 0o644); err != nil {
			return err
		}
	}
	if jsonPath != "" || mdPath != "" {
		fmt.Fprintf(os.Stderr, "loadgen: wrote %s\n", strings.Trim(jsonPath+" "+mdPath, " "))
	}
	return nil
}

func cmdRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loadgen run", flag.ContinueOnError)
	var f runFlags
	f.register(fs, "1000,5000,10000")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: loadgen run [flags]\n\nSeeds sites through the running edge, opens widget websockets and sends messages at\nfixed aggregate rates in stairs; prints a table and writes report.json and report.md.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := f.config(ctx)
	if err != nil {
		return err
	}
	stopProfile, err := startProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := stairs.Run(ctx, cfg)
	if rep != nil {
		if werr := writeReport(rep, f.out, f.md); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}
