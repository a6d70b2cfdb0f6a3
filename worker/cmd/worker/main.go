// Command worker delivers spookat's jobs (Slack, Discord, webhooks, email) from NATS JetStream.
// Run one per spare core next to `edge -worker none`, or on other boxes against a NATS cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // only served with -pprof
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"spookat/worker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	natsURL := fs.String("nats-url", env("SPOOKAT_NATS_URL", nats.DefaultURL), "NATS server(s), comma separated")
	natsCreds := fs.String("nats-creds", env("SPOOKAT_NATS_CREDS", ""), "NATS credentials file")
	metricsAddr := fs.String("metrics-addr", env("SPOOKAT_WORKER_METRICS", "127.0.0.1:9101"), "serve /metrics here (empty: off)")
	verbose := fs.Bool("v", false, "debug logging")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile here until exit (performance work)")
	pprofAddr := fs.String("pprof", "", "serve Go's /debug/pprof on this address (e.g. 127.0.0.1:6061; off when empty)")
	cfg := worker.DefaultConfig()
	cfg.SMTP.Password = os.Getenv("SPOOKAT_SMTP_PASSWORD")
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	if os.Getenv("GOGC") == "" {
		// Deliveries allocate a lot of short-lived garbage (HTTP, JSON) and memory is cheap
		// next to CPU here: collect less often.
		debug.SetGCPercent(400)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if *pprofAddr != "" {
		go func() { log.Error("pprof", "err", http.ListenAndServe(*pprofAddr, nil)) }()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registerer = reg

	if err := cfg.Check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	opts := []nats.Option{nats.Name("spookat-worker"), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second)}
	if *natsCreds != "" {
		opts = append(opts, nats.UserCredentials(*natsCreds))
	}
	nc, err := nats.Connect(*natsURL, opts...)
	if err != nil {
		return fmt.Errorf("connect %s: %w", *natsURL, err)
	}
	defer nc.Close()

	if *metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		srv := &http.Server{Addr: *metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		}()
		defer srv.Close()
	}
	if err := worker.Run(ctx, nc, cfg); err != nil {
		return err
	}
	// Make sure the last acks and results leave the socket before exit.
	return nc.Drain()
}
