package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"spookat/loadgen/internal/proc"
	"spookat/loadgen/internal/stairs"
)

// Peer is a server other than the edge that speaks the widget protocol's load-test subset
// (hello on open, message → ack after commit, posts to the Slack mock when a site has Slack).
// Its setups are started, pinned and measured as the edge's are, so the report can put edge
// and peer side by side. The argv templates have {data}, {sites}, {addr} and {slack_api}
// filled in.
type Peer struct {
	Name      string   // what the report calls it (e.g. "bun-sqlite")
	Seed      []string // creates {sites} sites in {data} and prints {"sites":[{id,key}]}
	SeedSlack []string // appended to Seed for the Slack setups
	Serve     []string // serves the widget socket on {addr} from {data}
	Group     []string // appended to Serve for the +group setups (grouped commits)
	Slack     []string // appended to Serve with the Slack mock ({slack_api})
	Ready     string   // a path answering 200 once it serves (""; any TCP accept)
	// Skip says why the peer setups cannot run here ("": they can). They are then reported as
	// skipped, loudly, rather than left out.
	Skip string
}

// PeerSetups are the peer's shapes: one transaction per message (the original product's),
// commits grouped per event-loop turn, and with the Slack mock (512 posts in flight, as the
// edge's -chat-inflight).
var PeerSetups = []Setup{
	{Name: "peer", Peer: true},
	{Name: "peer+group", Peer: true, Group: true},
	{Name: "peer+slack", Peer: true, Slack: true},
}

// BunPeer installs the Bun peer in src (../shared/peers/bun-sqlite) into work: src is copied
// (shared/ may be read-only) and `npm install` fetches the Bun binary. What it returns has Skip
// set, with the reason, when that cannot be done.
func BunPeer(ctx context.Context, src, work string, log io.Writer) Peer {
	p := Peer{Name: "bun-sqlite"}
	skip := func(err error) Peer {
		p.Skip = fmt.Sprintf("the Bun peer could not be installed from %s: %v", src, err)
		return p
	}
	if _, err := os.Stat(filepath.Join(src, "server.ts")); err != nil {
		return skip(err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return skip(errors.New("npm is not installed (apt-get install npm)"))
	}
	dst := filepath.Join(work, "bun-peer")
	bun := filepath.Join(dst, "node_modules", "@oven", "bun-linux-x64", "bin", "bun")
	if _, err := os.Stat(bun); err != nil {
		fmt.Fprintf(log, "loadgen: compare: installing the Bun peer from %s with npm into %s\n", src, dst)
		os.RemoveAll(dst)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return skip(err)
		}
		for _, f := range []string{"server.ts", "checkpointer.ts", "package.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				return skip(err)
			}
			if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
				return skip(err)
			}
		}
		ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ictx, npm, "install", "--no-audit", "--no-fund", "--prefix", dst).CombinedOutput()
		if err != nil {
			return skip(fmt.Errorf("npm install: %v: %s", err, strings.TrimSpace(string(out))))
		}
		if _, err := os.Stat(bun); err != nil {
			return skip(fmt.Errorf("npm install left no %s", bun))
		}
	}
	server := filepath.Join(dst, "server.ts")
	p.Seed = []string{bun, server, "seed", "--data", "{data}", "--sites", "{sites}"}
	p.SeedSlack = []string{"--slack", "--token", "xoxb-loadgen"}
	p.Serve = []string{bun, server, "serve", "--data", "{data}", "--addr", "{addr}"}
	p.Group = []string{"--group"}
	p.Slack = []string{"--slots", "512", "--slack-api", "{slack_api}"}
	p.Ready = "/healthz"
	return p
}

// runPeer runs a peer setup: the Slack mock when it has Slack, the peer's seed, then its
// server pinned as the edge would be, and the same stairs.
func runPeer(ctx context.Context, cfg Config, s Setup, data string, st *starter, res *Result) Result {
	fail := func(err error) Result { return st.result(res, err) }
	p := cfg.Peer
	if p.Skip != "" {
		res.Skipped = true
		return fail(errors.New(p.Skip))
	}
	if len(p.Serve) == 0 || len(p.Seed) == 0 {
		res.Skipped = true
		return fail(errors.New("no peer is configured (-peer-dir, or -peer-seed and -peer-serve)"))
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		return fail(err)
	}
	vars := map[string]string{"data": data, "sites": strconv.Itoa(cfg.Sites), "addr": addr}
	mockURL := ""
	if s.Slack {
		mockAddr, err := proc.FreeAddr()
		if err != nil {
			return fail(err)
		}
		if mockURL, err = startMock(ctx, cfg, st, mockAddr); err != nil {
			return fail(err)
		}
		vars["slack_api"] = mockURL + cfg.SlackAPIPath
	}
	seed := p.Seed
	if s.Slack {
		seed = slices.Concat(seed, p.SeedSlack)
	}
	seed = expand(seed, vars)
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, seed[0], seed[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fail(fmt.Errorf("peer seed %v: %v: %s", seed, err, bytes.TrimSpace(errb.Bytes())))
	}
	sites, err := stairs.ParseSites(out.Bytes())
	if err != nil {
		return fail(fmt.Errorf("peer seed: %w", err))
	}
	serve := p.Serve
	if s.Group {
		serve = slices.Concat(serve, p.Group)
	}
	if s.Slack {
		serve = slices.Concat(serve, p.Slack)
	}
	srv, err := st.start("peer", cfg.EdgeCPUs, expand(serve, vars)...)
	if err != nil {
		return fail(err)
	}
	base := "http://" + addr
	if p.Ready != "" {
		err = srv.WaitHTTP(ctx, base+p.Ready, 60*time.Second)
	} else {
		err = waitTCP(ctx, srv, addr)
	}
	if err != nil {
		return fail(err)
	}
	rc := cfg.Run
	rc.EdgeURL = base
	rc.ServerName = "peer"
	rc.Keys = stairs.Keys(sites)
	rc.EdgePID = srv.PID()
	rc.SlackMock = mockURL
	return measure(ctx, cfg, s, filepath.Dir(data), rc, st, res)
}
