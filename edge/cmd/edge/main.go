// Command edge is spookat's edge: websockets, the only SQLite writer, embedded NATS, and
// (by default) the delivery worker in-process. The same binary holds the admin commands;
// `edge help` lists them (see commands in help.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // only served with -pprof
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	_ "time/tzdata" // office hours name IANA time zones; a static binary on a bare host has no zoneinfo

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/broker"
	"spookat/edge/internal/clientip"
	"spookat/edge/internal/files"
	"spookat/edge/internal/plans"
	"spookat/edge/internal/server"
	"spookat/schema"
	"spookat/worker"
	"spookat/worker/egress"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // help was asked for and printed
		}
		fmt.Fprintln(os.Stderr, "edge:", err)
		os.Exit(1)
	}
}

func run(args []string) error { return dispatch(args) }

func serve(args []string) error {
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	cfg := server.Config{}
	fs.StringVar(&cfg.Addr, "addr", ":8080", "HTTP and websocket listen address")
	fs.StringVar(&cfg.DataDir, "data", "data", "data directory: SQLite file, JetStream store, admin socket")
	fs.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "embedded NATS client address (workers and the nats CLI connect here)")
	fs.StringVar(&cfg.NATSMonitor, "nats-monitor", "127.0.0.1:8222", "embedded NATS HTTP monitoring address (empty: off)")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "use this external NATS (a cluster: comma-separated URLs) instead of embedding one")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", "", "the edge's credentials file for -nats-url (default: signed by this data directory's authority, which the cluster trusts through 'edge nats-config')")
	fs.StringVar(&cfg.NATSTLS.Cert, "nats-tls-cert", "", "embedded NATS: the server's TLS certificate (required to listen beyond loopback); external: the edge's client certificate")
	fs.StringVar(&cfg.NATSTLS.Key, "nats-tls-key", "", "key of -nats-tls-cert")
	fs.StringVar(&cfg.NATSTLS.CA, "nats-tls-ca", "", "with -nats-url: verify the NATS servers with this CA (its presence, not the URL's scheme, turns TLS on)")
	fs.StringVar(&cfg.NATSTLS.ClientCA, "nats-client-ca", "", "embedded NATS: clients must also present a certificate this CA signed (mutual TLS)")
	fs.BoolVar(&cfg.NATSInsecure, "nats-insecure", false, "labs only: allow the embedded NATS beyond loopback without TLS, and an external NATS that asks for no credentials")
	fs.IntVar(&cfg.Replicas, "nats-replicas", 1, "replicas of the streams and buckets (3 on a NATS cluster)")
	plansFile := fs.String("plans", "", "a plans file (JSON: plans, their limits, the Paddle prices that buy them; ops/RUNBOOK.md \"Plans and billing\"): limits per plan and Paddle's notifications at /v1/integrations/paddle/events; empty: no limits, no billing")
	fileQuotaMB := fs.Int64("file-quota-mb", files.DefaultQuota/1_000_000, "attachments a site may hold on disk, MB (1 MB = 1,000,000 bytes, as the messages count them)")
	diskReserveMB := fs.Int64("disk-reserve-mb", files.DefaultReserve/1_000_000, "attachments stop when the disk of the data directory has less than this free, MB")
	fs.StringVar(&cfg.PublicURL, "public-url", "", "URL browsers use to reach this edge (default http://localhost:<port>)")
	fs.IntVar(&cfg.WriteQueue, "write-queue", 50_000, "writes that may wait for the SQLite writer; past it a message is refused with \"unavailable\" at once instead of waiting")
	fs.IntVar(&cfg.WALPages, "wal-max-pages", 16384, "SQLite WAL size in 4 KiB pages past which the writer copies it back into the database itself between two commits, so that it starts again from its beginning (16384: 64 MiB)")
	syncMode := fs.String("sync", "normal", "durability: normal (a process crash loses nothing; a power cut may lose the last second of messages) or full (SQLite and the embedded JetStream sync every commit: a power cut loses no acked message and no delivery)")
	workerMode := fs.String("worker", "inproc", "inproc: run the delivery worker in this process; none: run bin/worker separately")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pprofAddr := fs.String("pprof", "", "serve Go's /debug/pprof on this address (e.g. 127.0.0.1:6060; off when empty)")
	followParentFlag := fs.Bool("follow-parent", false, "stop when the parent process is told to stop, even by a signal it does not pass on (make run; Linux)")
	withDemo := fs.Bool("demo", false, "create the demo site and operator on first start, and print them with the addresses this edge listens on once it serves (make run)")
	bc := brakes.Defaults()
	fs.Float64Var(&bc.ConnMsgRate, "conn-msg-rate", bc.ConnMsgRate, "messages per second per connection (0: no limit)")
	fs.Float64Var(&bc.ConnMsgBurst, "conn-msg-burst", bc.ConnMsgBurst, "burst of -conn-msg-rate")
	fs.Float64Var(&bc.IPSocketRate, "ip-socket-rate", bc.IPSocketRate, "new sockets per second per (site, IP) (0: no limit)")
	fs.Float64Var(&bc.IPSocketBurst, "ip-socket-burst", bc.IPSocketBurst, "burst of -ip-socket-rate")
	fs.Float64Var(&bc.IPConvRate, "ip-conv-rate", bc.IPConvRate, "new conversations per second per (site, IP) (0: no limit)")
	fs.Float64Var(&bc.IPConvBurst, "ip-conv-burst", bc.IPConvBurst, "burst of -ip-conv-rate")
	fs.Float64Var(&bc.IPUploadRate, "ip-upload-rate", bc.IPUploadRate, "attachments per second per (site, IP) (0: no limit)")
	fs.Float64Var(&bc.IPUploadBurst, "ip-upload-burst", bc.IPUploadBurst, "burst of -ip-upload-rate")
	fs.IntVar(&bc.FloodThreshold, "flood-threshold", bc.FloodThreshold, "new conversations a minute a site gets before its flood brake engages (0: off)")
	fs.IntVar(&bc.FloodDivisor, "flood-divisor", bc.FloodDivisor, "each flood brake level divides the allowance by this")
	fs.IntVar(&bc.FloodMaxLevel, "flood-max-level", bc.FloodMaxLevel, "highest flood brake level")
	fs.Float64Var(&bc.SiteMsgRate, "site-msg-rate", bc.SiteMsgRate, "sustained messages per second per site (0: no limit)")
	fs.Float64Var(&bc.SiteMsgBurst, "site-msg-burst", bc.SiteMsgBurst, "burst of -site-msg-rate")
	fs.StringVar(&cfg.ProxyHeader, "proxy-header", "", "take the client's IP from this header (e.g. X-Forwarded-For) when the peer is one of -trusted-proxies")
	trustedProxies := fs.String("trusted-proxies", "", "CIDRs or addresses of the proxies allowed to set -proxy-header, comma-separated (e.g. 127.0.0.1,10.0.0.0/8)")
	fs.Float64Var(&cfg.SocketRate, "socket-rate", 1000, "new widget sockets a second, all sites together; more wait their turn (up to 5 s, then 503 busy), so a reconnect storm leaves CPU for open sockets (0: unpaced)")
	fs.IntVar(&cfg.MaxSockets, "max-sockets", 0, "open HTTP and websocket connections past which new ones get 503 (0: the file limit less a reserve for SQLite, NATS and outbound posts)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", server.DefaultRequestTimeout, "a new connection's first byte must come within this, and its request be read within it (an attachment's upload: 2 min); silent connections never hold the socket budget longer")
	fs.IntVar(&cfg.OpeningPerAddr, "opening-per-addr", 32, "connections one client address may hold before their first answer (trusted proxies: no cap; -1: no cap)")
	fs.DurationVar(&cfg.RetentionTick, "retention-every", server.RetentionEvery, "how often sites' retention is applied: a pass deletes the conversations idle past their site's retention days")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "127.0.0.1:9102", "serve /metrics on this address, apart from -addr (empty: off)")
	// Disk is a budget: each stream's bytes on disk (see ops/RUNBOOK.md "Disk budget").
	cfg.StreamLimits = schema.StreamLimits{}.WithDefaults()
	fs.Var((*broker.Bytes)(&cfg.StreamLimits.JobsMaxBytes), "jobs-max-bytes", "byte budget of JOBS, a `size` such as 1GiB or 512MiB: when full, new jobs are kept by the edge (visitors still get acks) until workers make room")
	fs.Var((*broker.Bytes)(&cfg.StreamLimits.ResultsMaxBytes), "results-max-bytes", "byte budget of RESULTS (delivery outcomes kept up to 72 h), a `size` such as 1GiB: when full, the oldest are dropped")
	fs.Var((*broker.Bytes)(&cfg.StreamLimits.DeadMaxBytes), "dead-max-bytes", "byte budget of DEAD (jobs that used up their attempts), a `size` such as 256MiB: when full, the oldest are dropped")
	fs.Var((*broker.Bytes)(&cfg.StreamLimits.InboundMaxBytes), "inbound-max-bytes", "byte budget of INBOUND (replies the workers heard from Discord, kept up to 72 h), a `size` such as 256MiB: when full, workers hold new ones until there is room")
	wcfg := worker.DefaultConfig()
	wcfg.RegisterFlags(fs)
	wcfg.RegisterQueueFlags(fs)
	err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := validate(fs); err != nil {
		return err
	}
	cfg.Brakes = bc
	if cfg.TrustedProxies, err = clientip.ParsePrefixes(*trustedProxies); err != nil {
		return fmt.Errorf("-trusted-proxies: %w", err)
	}
	if cfg.ProxyHeader != "" && len(cfg.TrustedProxies) == 0 {
		return fmt.Errorf("-proxy-header %s needs -trusted-proxies, the addresses of the proxies that set it (e.g. -trusted-proxies 127.0.0.1): without it any client could claim any address", cfg.ProxyHeader)
	}
	if cfg.SocketRate < 0 {
		return fmt.Errorf("-socket-rate must be 0 (unpaced) or more, not %g", cfg.SocketRate)
	}
	if cfg.MaxSockets < 0 {
		return fmt.Errorf("-max-sockets must be 0 (from the file limit) or more, not %d", cfg.MaxSockets)
	}
	switch *syncMode {
	case "normal":
	case "full":
		cfg.SyncFull = true
	default:
		return fmt.Errorf("-sync must be normal or full, not %q", *syncMode)
	}
	// The flags are good and nothing is open yet: the one moment to start again with the
	// runtime setting it reads only at its start.
	keepSysmonAwake()
	log := newLogger(*logLevel)
	egress.StdLog(log) // net/http's own lines, about webhook targets among others
	if *pprofAddr != "" {
		go func() { log.Error("pprof", "err", http.ListenAndServe(*pprofAddr, nil)) }()
	}
	if err := wcfg.Check(); err != nil {
		return err
	}
	cfg.Worker = &wcfg
	cfg.StopTimeout = wcfg.StopTimeout // one flag bounds the whole stop
	switch *workerMode {
	case "inproc":
		wcfg.Logger = log.With("part", "worker")
		cfg.InprocWorker = true
	case "none":
	default:
		return fmt.Errorf("-worker must be inproc or none, not %q", *workerMode)
	}
	publicGiven := cfg.PublicURL != ""
	if !publicGiven {
		port := cfg.Addr[strings.LastIndex(cfg.Addr, ":")+1:]
		cfg.PublicURL = "http://localhost:" + port
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if *plansFile != "" {
		if cfg.Plans, err = plans.Load(*plansFile); err != nil {
			return err
		}
	}
	if *fileQuotaMB < 1 {
		return fmt.Errorf("-file-quota-mb must be 1 or more, not %d", *fileQuotaMB)
	}
	cfg.FileQuota = *fileQuotaMB * 1_000_000
	if *diskReserveMB < 0 {
		return fmt.Errorf("-disk-reserve-mb must be 0 or more, not %d", *diskReserveMB)
	}
	cfg.DiskReserve = max(*diskReserveMB*1_000_000, -1) // 0 MB: no reserve (-1 to the handler)
	if *diskReserveMB == 0 {
		cfg.DiskReserve = -1
	}
	// Everything the edge writes (database, JetStream, credentials, logs) is its own.
	syscall.Umask(0o077)
	// Half Go's default heap growth: ~10 MB less resident at 10,000 messages/s for no CPU
	// a message that could be measured (bench/path.md). GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	if *withDemo {
		d, err := ensureDemo(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("-demo: %w", err)
		}
		cfg.Ready = func(a server.Addrs) {
			public := cfg.PublicURL
			if !publicGiven {
				public = urlOf(a.HTTP)
			}
			printDemo(os.Stdout, d, public, &a)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt, syscall.SIGHUP)
	defer stop()
	if *followParentFlag {
		go followParent(ctx, stop, log)
	}
	return server.Run(ctx, cfg, log)
}

// parse reads flags, then fills each flag not given on the command line from the
// environment: -nats-url from SPOOKAT_NATS_URL, and so on.
func parse(fs *flag.FlagSet, args []string) error {
	// The flag package would print the whole usage on any mistake; one line and where help
	// is says more.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs)
			return err
		}
		return usageError{fs.Name(), err}
	}
	err := schema.FlagsFromEnv(fs)
	if fs.NArg() > 0 {
		return usageError{fs.Name(), fmt.Errorf("unexpected argument %q (flags only here; a flag's value goes right after it, e.g. -data /var/lib/spookat)", fs.Arg(0))}
	}
	return err
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
