// Package compare is `loadgen compare`: it starts and stops the processes itself and runs the
// same stairs in four setups (one- and two-process, each without and with the Slack mock),
// the edge pinned to one CPU and worker, mock and generator to the other, then writes a
// report table, JSON and an SVG chart of p99 against rate.
package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"spookat/loadgen/internal/proc"
	"spookat/loadgen/internal/stairs"
	"spookat/loadgen/natscluster"
)

// LoadBrakes raise the edge's per-connection and per-site message brakes far above the load
// a stair sends (each socket sends 10-20 messages a second), so stairs measure throughput
// with the brake checks still on the hot path. The flood test keeps the real defaults.
var LoadBrakes = []string{"-conn-msg-rate", "1e6", "-conn-msg-burst", "1e6", "-site-msg-rate", "1e7", "-site-msg-burst", "1e7"}

// Config is one compare.
type Config struct {
	EdgeBin, WorkerBin string
	// NATSServerBin is nats-server, for the cluster setup (three nodes on loopback).
	NATSServerBin string
	// MockCmd starts the Slack mock: argv with {addr} and {latency} replaced. Empty: no setups
	// with Slack.
	MockCmd      []string
	MockLatency  time.Duration
	SlackAPIFlag string   // flag of edge and worker that sets the Slack API base URL (e.g. slack-api)
	SlackAPIPath string   // appended to the mock's base URL for that flag (e.g. /api/)
	WorkerArgs   []string // argv after the binary, {nats} replaced by the NATS URL
	EdgeArgs     []string // extra args for the edge
	Setups       []string // names to run, in order (default: all four)
	Dir          string   // work directory: data dirs and logs per setup
	EdgeCPUs     string   // taskset CPU list for the edge (default "0")
	OtherCPUs    string   // for worker and mock (default "1")
	Sites        int
	// Rounds runs the setups this many times, interleaved (each round in the opposite order
	// to the one before), so that a ratio between two setups can be taken within a round and
	// its median over the rounds: this VM's minutes differ more than most changes do.
	Rounds int
	Run    stairs.Config // Sockets, Stairs, Step, Warmup, Drain, Tick, Senders, TextBytes
	// Peer is the server the peer setups run (zero: none, and no peer setups by default).
	Peer Peer
	Log  io.Writer
}

// Setup is one of the shapes.
type Setup struct {
	Name       string `json:"name"`
	TwoProcess bool   `json:"two_process"`
	Slack      bool   `json:"slack_mock"`
	// Cluster: the edge and the worker on a 3-node JetStream cluster on loopback (streams
	// with three replicas, nodes on the other CPUs) instead of the embedded server.
	Cluster bool `json:"cluster,omitempty"`
	// Peer: Config.Peer's server instead of the edge, one process; Group: with its grouped
	// commits.
	Peer  bool `json:"peer,omitempty"`
	Group bool `json:"group_commit,omitempty"`
	// Inboxes: operators with their inbox open during the stairs, together watching every
	// site the sockets write to (each message reaches one inbox).
	Inboxes int `json:"inboxes,omitempty"`
}

// AllSetups are the four setups run by default.
var AllSetups = []Setup{
	{Name: "one-process", TwoProcess: false, Slack: false},
	{Name: "two-process", TwoProcess: true, Slack: false},
	{Name: "one-process+slack", TwoProcess: false, Slack: true},
	{Name: "two-process+slack", TwoProcess: true, Slack: true},
}

// InboxSetups run only when named: the one-process edge with 50 operators watching.
var InboxSetups = []Setup{
	{Name: "one-process+inbox", Inboxes: 50},
}

// ClusterSetups run only when named (-setups): they need -nats-server-bin.
var ClusterSetups = []Setup{
	{Name: "two-process+slack+cluster", TwoProcess: true, Slack: true, Cluster: true},
	{Name: "two-process+cluster", TwoProcess: true, Cluster: true},
}

// Result is one setup's run.
type Result struct {
	Setup  Setup          `json:"setup"`
	Pinned string         `json:"pinning"`
	Report *stairs.Report `json:"report,omitempty"`
	Error  string         `json:"error,omitempty"`
	Logs   string         `json:"logs_dir"`
	// Skipped: the setup could not run here (Error says why), e.g. a peer that did not install.
	Skipped bool `json:"skipped,omitempty"`
	// Round is the result's round (Config.Rounds), from 1; 0 when the compare ran once.
	Round int `json:"round,omitempty"`
}

// Label names the result in tables and sentences: its setup, and its round if any.
func (r Result) Label() string { return label(r.Setup.Name, r.Round) }

// label is a setup's name with its round (0: none), as tables and sentences write it.
func label(setup string, round int) string {
	if round == 0 {
		return setup
	}
	return fmt.Sprintf("%s #%d", setup, round)
}

// Report is the whole comparison.
type Report struct {
	StartedAt time.Time `json:"started_at"`
	Machine   string    `json:"machine"`
	Stairs    []float64 `json:"stairs"`
	Step      string    `json:"step"`
	Sockets   int       `json:"sockets"`
	Sites     int       `json:"sites"`
	Generator string    `json:"generator_pinning"`
	Results   []Result  `json:"results"`
	Summary   []string  `json:"summary"`
	Ratios    []Ratio   `json:"edge_over_peer,omitempty"`
	// Rounds and Medians: with Config.Rounds > 1, the ratios' medians over the rounds.
	Rounds  int     `json:"rounds,omitempty"`
	Medians []Ratio `json:"edge_over_peer_median,omitempty"`
}

func expand(argv []string, vars map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "{"+k+"}", v)
		}
		out[i] = a
	}
	return out
}

// Compare runs the setups one after the other.
func Compare(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.EdgeCPUs == "" {
		cfg.EdgeCPUs = "0"
	}
	if cfg.OtherCPUs == "" {
		cfg.OtherCPUs = "1"
	}
	if cfg.MockLatency <= 0 {
		cfg.MockLatency = 50 * time.Millisecond
	}
	setups := slices.Clone(AllSetups)
	if cfg.Peer.Name != "" {
		setups = append(setups, PeerSetups[1:]...) // the one-transaction peer only when named
	}
	if len(cfg.Setups) > 0 {
		setups = nil
		for _, name := range cfg.Setups {
			found := false
			for _, s := range slices.Concat(AllSetups, ClusterSetups, PeerSetups, InboxSetups) {
				if s.Name == name {
					setups = append(setups, s)
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("compare: unknown setup %q", name)
			}
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{
		StartedAt: time.Now().UTC(),
		Stairs:    cfg.Run.Stairs,
		Step:      cfg.Run.Step.String(),
		Sockets:   cfg.Run.Sockets,
		Sites:     cfg.Sites,
		Generator: SelfPinning(),
	}
	if cfg.Rounds > 1 {
		rep.Rounds = cfg.Rounds
	}
	for i := range max(cfg.Rounds, 1) {
		order := slices.Clone(setups)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		round := 0 // a compare run once has no rounds to name
		if rep.Rounds > 0 {
			round = i + 1
		}
		for _, s := range order {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(cfg.Log, "loadgen: compare: setup %s\n", label(s.Name, round))
			res := runSetup(ctx, cfg, s, round)
			if res.Skipped {
				fmt.Fprintf(cfg.Log, "loadgen: compare: SKIPPED %s: %s\n", res.Label(), res.Error)
			} else if res.Error != "" {
				fmt.Fprintf(cfg.Log, "loadgen: compare: %s: %s\n", res.Label(), res.Error)
			}
			rep.Results = append(rep.Results, res)
			if res.Report != nil && rep.Machine == "" {
				m := res.Report.Machine
				rep.Machine = fmt.Sprintf("%d CPUs, %s, kernel %s", m.NumCPU, m.CPUModel, m.Kernel)
			}
		}
	}
	rep.Summary = summarize(rep)
	rep.Ratios = ratios(rep)
	rep.Medians = medians(rep.Ratios, rep.Rounds)
	return rep, ctx.Err()
}

// starter starts a setup's processes, logging each to its own file in dir, and stops them
// in reverse order.
type starter struct {
	dir   string
	procs []*proc.Proc
	pins  []string
}

func (st *starter) start(name, cpus string, argv ...string) (*proc.Proc, error) {
	lf, err := proc.LogFile(filepath.Join(st.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	p, pinned, err := proc.Start(name, lf, cpus, argv[0], argv[1:]...)
	if err != nil {
		lf.Close()
		return nil, err
	}
	st.procs = append(st.procs, p)
	if pinned {
		st.pins = append(st.pins, fmt.Sprintf("%s on CPU %s", name, cpus))
	} else {
		st.pins = append(st.pins, name+" unpinned")
	}
	return p, nil
}

// result completes res with where the processes ran and err, if any.
func (st *starter) result(res *Result, err error) Result {
	res.Pinned = strings.Join(st.pins, ", ")
	if err != nil {
		res.Error = err.Error()
	}
	return *res
}

// stop stops every process, newest first; the first error of a process that did not exit on
// its own is kept in res.
func (st *starter) stop(res *Result) {
	for i := len(st.procs) - 1; i >= 0; i-- {
		if err := st.procs[i].Stop(15 * time.Second); err != nil && res.Error == "" {
			var ee interface{ ExitCode() int }
			if !errors.As(err, &ee) || ee.ExitCode() != -1 {
				res.Error = fmt.Sprintf("%s on stop: %v", st.procs[i].Name, err)
			}
		}
	}
}

// runSetup runs one setup; its data and logs go to a directory of its name in cfg.Dir, the
// last round's staying there.
func runSetup(ctx context.Context, cfg Config, s Setup, round int) (res Result) {
	res.Setup, res.Round = s, round
	dir := filepath.Join(cfg.Dir, s.Name)
	os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		res.Error = err.Error()
		return
	}
	res.Logs = dir
	st := &starter{dir: dir}
	defer st.stop(&res)
	start := st.start
	fail := func(err error) Result { return st.result(&res, err) }
	if s.Peer {
		return runPeer(ctx, cfg, s, data, st, &res)
	}

	addrs := make([]string, 5)
	for i := range addrs {
		a, err := proc.FreeAddr()
		if err != nil {
			return fail(err)
		}
		addrs[i] = a
	}
	edgeAddr, natsAddr, monAddr, mockAddr, metricsAddr := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4]
	var slackArgs []string
	mockURL := ""
	if s.Slack {
		var err error
		if mockURL, err = startMock(ctx, cfg, st, mockAddr); err != nil {
			return fail(err)
		}
		if cfg.SlackAPIFlag != "" {
			slackArgs = []string{"-" + cfg.SlackAPIFlag, mockURL + cfg.SlackAPIPath}
		}
	}
	natsURL := "nats://" + natsAddr
	edgeArgv := []string{cfg.EdgeBin, "-addr", edgeAddr, "-nats-listen", natsAddr, "-nats-monitor", monAddr, "-data", data}
	if s.Cluster {
		urls, err := startCluster(ctx, cfg, dir, data, start)
		if err != nil {
			return fail(err)
		}
		natsURL = urls
		edgeArgv = []string{cfg.EdgeBin, "-addr", edgeAddr, "-nats-url", urls, "-nats-replicas", "3", "-data", data}
	}
	if s.TwoProcess {
		edgeArgv = append(edgeArgv, "-worker", "none")
	} else {
		edgeArgv = append(edgeArgv, "-worker", "inproc")
		edgeArgv = append(edgeArgv, slackArgs...)
	}
	metricsURL := ""
	if hasFlag(ctx, cfg.EdgeBin, "metrics-addr") { // older edges serve /metrics on -addr
		edgeArgv = append(edgeArgv, "-metrics-addr", metricsAddr)
		metricsURL = "http://" + metricsAddr + "/metrics"
	}
	edgeArgv = append(edgeArgv, LoadBrakes...)
	edgeArgv = append(edgeArgv, cfg.EdgeArgs...) // later flags win: -edge-args can restore brakes
	edge, err := start("edge", cfg.EdgeCPUs, edgeArgv...)
	if err != nil {
		return fail(err)
	}
	base := "http://" + edgeAddr
	if err := edge.WaitHTTP(ctx, base+"/readyz", 60*time.Second); err != nil {
		return fail(err)
	}
	var workerPIDs []int
	if s.TwoProcess {
		// Every NATS client authenticates: the worker gets credentials of its own from the
		// edge's authority, as an operator would issue them.
		creds := filepath.Join(dir, "worker.creds")
		if out, err := exec.CommandContext(ctx, cfg.EdgeBin, "creds", "worker", "-id", "loadgen-1", "-out", creds, "-data", data).CombinedOutput(); err != nil {
			return fail(fmt.Errorf("edge creds worker: %v: %s", err, out))
		}
		argv := append([]string{cfg.WorkerBin, "-nats-creds", creds}, expand(cfg.WorkerArgs, map[string]string{"nats": natsURL})...)
		if s.Slack {
			argv = append(argv, slackArgs...)
		}
		w, err := start("worker", cfg.OtherCPUs, argv...)
		if err != nil {
			return fail(err)
		}
		workerPIDs = append(workerPIDs, w.PID())
		select { // a worker that cannot connect exits at once
		case <-w.Exited():
			return fail(fmt.Errorf("worker exited at start: %v (see %s)", w.Err(), filepath.Join(dir, "worker.log")))
		case <-time.After(500 * time.Millisecond):
		}
	}
	token := ""
	if s.Slack {
		token = "xoxb-loadgen"
	}
	sites, err := stairs.Seed(ctx, cfg.EdgeBin, data, cfg.Sites, token)
	if err != nil {
		return fail(err)
	}
	rc := cfg.Run
	rc.Page = true // the edge closes a socket that says nothing after its hello
	if s.Inboxes > 0 {
		if rc.Operators, err = stairs.SeedOperators(ctx, cfg.EdgeBin, data, stairs.Keys(sites), rc.Sockets, s.Inboxes); err != nil {
			return fail(err)
		}
	}
	rc.EdgeURL = base
	rc.MetricsURL = metricsURL
	rc.Keys = stairs.Keys(sites)
	rc.EdgePID = edge.PID()
	rc.WorkerPIDs = workerPIDs
	rc.SlackMock = mockURL
	return measure(ctx, cfg, s, dir, rc, st, &res)
}

// measure runs the stairs against a started setup and keeps its report in res and dir.
func measure(ctx context.Context, cfg Config, s Setup, dir string, rc stairs.Config, st *starter, res *Result) Result {
	rc.Setup = s.Name
	rc.Log = cfg.Log
	r, err := stairs.Run(ctx, rc)
	res.Report = r
	if r != nil {
		r.WriteJSON(filepath.Join(dir, "report.json"))
		os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644)
	}
	return st.result(res, err)
}

// startMock starts the Slack mock on addr, on the other CPUs, and returns its base URL.
func startMock(ctx context.Context, cfg Config, st *starter, addr string) (string, error) {
	if len(cfg.MockCmd) == 0 {
		return "", errors.New("no Slack mock command")
	}
	argv := expand(cfg.MockCmd, map[string]string{"addr": addr, "latency": cfg.MockLatency.String()})
	m, err := st.start("slack-mock", cfg.OtherCPUs, argv...)
	if err != nil {
		return "", err
	}
	if err := waitTCP(ctx, m, addr); err != nil {
		return "", err
	}
	return "http://" + addr, nil
}

// startCluster starts three nats-server nodes on loopback that trust the edge's authority
// (`edge nats-config` on the setup's data directory), on the other CPUs, and returns their
// URLs once every node reports healthy.
func startCluster(ctx context.Context, cfg Config, dir, data string, start func(name, cpus string, argv ...string) (*proc.Proc, error)) (string, error) {
	if cfg.NATSServerBin == "" {
		return "", errors.New("the cluster setups need -nats-server-bin (make build puts it in bin/)")
	}
	auth := filepath.Join(dir, "auth.conf")
	if out, err := exec.CommandContext(ctx, cfg.EdgeBin, "nats-config", "-data", data, "-out", auth).CombinedOutput(); err != nil {
		return "", fmt.Errorf("edge nats-config: %v: %s", err, out)
	}
	nodes := make([]natscluster.Node, 3)
	var urls []string
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("nats-n%d", i+1)
		for _, a := range []*string{&nodes[i].Client, &nodes[i].Route, &nodes[i].HTTP} {
			addr, err := proc.FreeAddr()
			if err != nil {
				return "", err
			}
			*a = addr
		}
		urls = append(urls, "nats://"+nodes[i].Client)
	}
	co := natscluster.Options{Include: "auth.conf", StoreDir: func(n natscluster.Node) string { return filepath.Join(dir, n.Name) }}
	var ps []*proc.Proc
	for _, n := range nodes {
		path := filepath.Join(dir, n.Name+".conf")
		if err := os.WriteFile(path, []byte(natscluster.Config(n, nodes, co)), 0o600); err != nil {
			return "", err
		}
		p, err := start(n.Name, cfg.OtherCPUs, cfg.NATSServerBin, "-c", path)
		if err != nil {
			return "", err
		}
		ps = append(ps, p)
	}
	for i, p := range ps {
		if err := p.WaitHTTP(ctx, "http://"+nodes[i].HTTP+"/healthz", 60*time.Second); err != nil {
			return "", err
		}
	}
	return strings.Join(urls, ","), nil
}

// hasFlag reports whether bin's -h lists -name (compare runs old binaries too).
func hasFlag(ctx context.Context, bin, name string) bool {
	out, _ := exec.CommandContext(ctx, bin, "-h").CombinedOutput()
	return strings.Contains(string(out), "-"+name+" ")
}
