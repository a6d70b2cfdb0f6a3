package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"spookat/loadgen/internal/compare"
	"spookat/loadgen/internal/stairs"
)

func cmdCompare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loadgen compare", flag.ContinueOnError)
	var (
		edgeBin    = fs.String("edge-bin", "bin/edge", "the edge binary")
		workerBin  = fs.String("worker-bin", "bin/worker", "the worker binary (two-process setups)")
		natsBin    = fs.String("nats-server-bin", "bin/nats-server", "nats-server, for the cluster setups (three nodes on loopback)")
		mockCmd    = fs.String("mock-cmd", "{self} mock -addr {addr} -latency {latency}", "command that starts the Slack mock ({self} is this loadgen; {addr}, {latency} are filled in); empty: skip the Slack setups")
		mockLat    = fs.Duration("mock-latency", 50*time.Millisecond, "the Slack mock's answer latency")
		apiFlag    = fs.String("slack-api-flag", "slack-api", "flag of edge and worker that points Slack calls at the mock")
		apiPath    = fs.String("slack-api-path", "/api/", "path appended to the mock's URL for -slack-api-flag")
		workerArgs = fs.String("worker-args", "-nats-url {nats}", "worker arguments ({nats} is the edge's NATS URL)")
		edgeArgs   = fs.String("edge-args", "", "extra edge arguments, space separated")
		setups     = fs.String("setups", "", "setups to run, comma separated (default: one-process,two-process,one-process+slack,two-process+slack; also two-process+cluster, two-process+slack+cluster: a 3-node cluster on loopback, streams R3)")
		dir        = fs.String("dir", filepath.Join(os.TempDir(), "spookat-compare"), "work directory: a data directory and logs per setup")
		edgeCPUs   = fs.String("edge-cpus", "0", "CPUs of the edge (taskset -c)")
		otherCPUs  = fs.String("other-cpus", "1", "CPUs of the worker, the mock and loadgen itself")
		pin        = fs.Bool("pin", true, "pin processes with taskset when it is installed")
		sites      = fs.Int("sites", 1200, "sites to seed in each setup")
		sockets    = fs.Int("sockets", 1000, "widget websockets")
		stairsFlag = fs.String("stairs", "1000,5000,10000,15000,20000", "aggregate rates in messages/s")
		step       = fs.Duration("step", 60*time.Second, "length of each stair")
		warmup     = fs.Duration("warmup", 2*time.Second, "start of each stair left out of the figures")
		drain      = fs.Duration("drain", 30*time.Second, "wait for acks and the Slack backlog after a stair at most this long")
		senders    = fs.Int("senders", 4, "sender goroutines")
		rounds     = fs.Int("rounds", 1, "run the setups this many times, interleaved (each round in the opposite order), and report each ratio's median over the rounds")
		out        = fs.String("out", "bench/report.json", "JSON report")
		md         = fs.String("md", "bench/report.md", "Markdown report")
		svg        = fs.String("svg", "bench/p99.svg", "SVG chart of p99 against rate")
		peerDir    = fs.String("peer-dir", "../shared/peers/bun-sqlite", "the Bun peer's sources, installed with npm into -dir for the peer setups (empty: no peer)")
		peerSeed   = fs.String("peer-seed", "", "a peer of your own instead: command that seeds {sites} sites in {data} and prints {\"sites\":[{\"id\",\"key\"}]}")
		peerServe  = fs.String("peer-serve", "", "its server command, serving the widget socket on {addr} from {data}")
		peerSeedSl = fs.String("peer-seed-slack-args", "", "appended to -peer-seed for the Slack setup")
		peerGroup  = fs.String("peer-group-args", "", "appended to -peer-serve for peer+group")
		peerSlack  = fs.String("peer-slack-args", "", "appended to -peer-serve for peer+slack ({slack_api} is the mock's API URL)")
		peerReady  = fs.String("peer-ready", "", "a path of the peer that answers 200 once it serves (empty: a TCP accept)")
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: loadgen compare [flags]\n\nStarts and stops the processes itself and runs the same stairs in four setups (one-process\nand two-process, each without and with the Slack mock) and two of the peer's (peer+group,\npeer+slack; peer, one transaction a message, when named), the server pinned to -edge-cpus and\nthe worker, mock and generator to -other-cpus. Writes a Markdown table with edge ÷ peer\nratios, JSON and an SVG chart.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The generator shares the other CPU with worker and mock: re-run this process under taskset.
	if *pin && os.Getenv("LOADGEN_PINNED") == "" {
		if ts, err := exec.LookPath("taskset"); err == nil {
			self, err := os.Executable()
			if err == nil {
				env := append(os.Environ(), "LOADGEN_PINNED=1")
				argv := append([]string{ts, "-c", *otherCPUs, self, "compare"}, args...)
				return syscall.Exec(ts, argv, env)
			}
		}
	}
	rates, err := parseRates(*stairsFlag)
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	var mock []string
	if strings.TrimSpace(*mockCmd) != "" {
		for _, a := range strings.Fields(*mockCmd) {
			mock = append(mock, strings.ReplaceAll(a, "{self}", self))
		}
	}
	var setupList []string
	if *setups != "" {
		for _, s := range strings.Split(*setups, ",") {
			setupList = append(setupList, strings.TrimSpace(s))
		}
	} else if len(mock) == 0 {
		setupList = []string{"one-process", "two-process", "peer+group"}
	}
	wantPeer := len(setupList) == 0
	for _, s := range setupList {
		wantPeer = wantPeer || strings.HasPrefix(s, "peer")
	}
	var peer compare.Peer
	switch {
	case *peerServe != "":
		peer = compare.Peer{Name: "custom", Seed: strings.Fields(*peerSeed), SeedSlack: strings.Fields(*peerSeedSl),
			Serve: strings.Fields(*peerServe), Group: strings.Fields(*peerGroup), Slack: strings.Fields(*peerSlack), Ready: *peerReady}
	case *peerDir != "" && wantPeer:
		peer = compare.BunPeer(ctx, *peerDir, *dir, os.Stderr)
		if peer.Skip != "" {
			fmt.Fprintf(os.Stderr, "loadgen: compare: SKIPPED the peer setups: %s\n", peer.Skip)
		}
	}
	ec, oc := *edgeCPUs, *otherCPUs
	if !*pin {
		ec, oc = "", ""
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	cfg := compare.Config{
		EdgeBin:       abs(*edgeBin),
		WorkerBin:     abs(*workerBin),
		NATSServerBin: abs(*natsBin),
		MockCmd:       mock,
		MockLatency:   *mockLat,
		SlackAPIFlag:  *apiFlag,
		SlackAPIPath:  *apiPath,
		WorkerArgs:    strings.Fields(*workerArgs),
		EdgeArgs:      strings.Fields(*edgeArgs),
		Setups:        setupList,
		Dir:           *dir,
		EdgeCPUs:      ec,
		OtherCPUs:     oc,
		Sites:         *sites,
		Rounds:        *rounds,
		Peer:          peer,
		Run: stairs.Config{
			Sockets: *sockets,
			Stairs:  rates,
			Step:    *step,
			Warmup:  *warmup,
			Drain:   *drain,
			Senders: *senders,
		},
		Log: os.Stderr,
	}
	rep, err := compare.Compare(ctx, cfg)
	if rep == nil {
		return err
	}
	for _, p := range []string{*out, *md, *svg} {
		if p != "" {
			if mkErr := os.MkdirAll(filepath.Dir(p), 0o755); mkErr != nil {
				return mkErr
			}
		}
	}
	chart := ""
	if *svg != "" {
		if s := rep.SVG(); s != "" {
			if werr := os.WriteFile(*svg, []byte(s), 0o644); werr != nil {
				return werr
			}
			chart = *svg
			if *md != "" {
				if rel, rerr := filepath.Rel(filepath.Dir(*md), *svg); rerr == nil {
					chart = rel
				}
			}
		}
	}
	text := rep.Markdown(chart)
	fmt.Print(text)
	if *md != "" {
		if werr := os.WriteFile(*md, []byte(text), 0o644); werr != nil {
			return werr
		}
	}
	if *out != "" {
		if werr := rep.WriteJSON(*out); werr != nil {
			return werr
		}
	}
	return err
}
