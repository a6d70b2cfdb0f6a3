// Command worker delivers spookat's jobs (Slack, Discord, webhooks, email) from NATS JetStream.
// Run one per spare core next to `edge -worker none`, or on other boxes against a NATS cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // only served with -pprof
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"spookat/schema"
	"spookat/worker"
	"spookat/worker/egress"
	"spookat/worker/internal/rawtcp"
)

// credsWorkerID reads the worker id a credentials file was issued for (its JWT's name, see
// schema.IdentityName) and the account that signed it: the edge's, whose key signs SITES.
func credsWorkerID(path string) (id, issuer string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("-nats-creds: %w", err)
	}
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return "", "", fmt.Errorf("-nats-creds %s: not a NATS credentials file: %w", path, err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return "", "", fmt.Errorf("-nats-creds %s: %w", path, err)
	}
	role, id := schema.ParseIdentityName(uc.Name)
	if role != schema.RoleWorker || id == "" {
		return "", "", fmt.Errorf("-nats-creds %s holds %q credentials, not a worker's: issue them with `edge creds worker -id <id> -out FILE`", path, uc.Name)
	}
	return id, uc.Issuer, nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	natsURL := fs.String("nats-url", nats.DefaultURL, "NATS server(s), comma separated")
	natsCreds := fs.String("nats-creds", "", "this worker's NATS credentials (edge creds worker -id ID -out FILE); its id comes from them")
	tlsCA := fs.String("nats-tls-ca", "", "verify the NATS server's certificate with this CA (the edge's -nats-tls-cert beyond loopback)")
	tlsCert := fs.String("nats-tls-cert", "", "client certificate, when the server asks for one (edge -nats-tls-ca)")
	tlsKey := fs.String("nats-tls-key", "", "key of -nats-tls-cert")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9101", "serve /metrics here (empty: off)")
	verbose := fs.Bool("v", false, "debug logging")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile here until exit (performance work)")
	pprofAddr := fs.String("pprof", "", "serve Go's /debug/pprof on this address (e.g. 127.0.0.1:6061; off when empty)")
	cfg := worker.DefaultConfig()
	cfg.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: worker -nats-creds FILE [flags]\n\ndelivers the edge's jobs; every flag can also be set from the environment: -nats-url from SPOOKAT_NATS_URL, and so on\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Every flag can come from the environment, as the edge's: -smtp-password from
	// SPOOKAT_SMTP_PASSWORD (better there than in every ps listing), and so on.
	if err := schema.FlagsFromEnv(fs); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	egress.StdLog(log) // net/http's own lines, about delivery targets among others
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
	// Credentials the server stops taking (revoked, expired, another authority) end the
	// worker with a sentence: running on without a connection helps nobody, and a supervisor
	// restarting it shows an SRE why in its log.
	ctx, refused := context.WithCancelCause(ctx)
	refusedBy := func(err error) {
		if errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
			strings.Contains(strings.ToLower(fmt.Sprint(err)), "authentication revoked") {
			refused(err)
		}
	}

	if *natsCreds == "" {
		return errors.New("-nats-creds is required: every NATS client authenticates. Issue this worker's with " +
			"`edge creds worker -id <id> -out worker.creds` on the edge's box and pass -nats-creds worker.creds")
	}
	id, issuer, err := credsWorkerID(*natsCreds)
	if err != nil {
		return err
	}
	cfg.SitesKey = issuer
	switch {
	case cfg.WorkerID == "":
		cfg.WorkerID = id
	case schema.Token(cfg.WorkerID) != schema.Token(id):
		return fmt.Errorf("-worker-id %q does not match %s, which was issued for worker %q: drop -worker-id, or issue credentials for it with `edge creds worker -id %s -out FILE`",
			cfg.WorkerID, *natsCreds, id, cfg.WorkerID)
	}
	opts := []nats.Option{nats.Name("spookat-worker " + cfg.WorkerID), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second),
		nats.UserCredentials(*natsCreds), nats.CustomInboxPrefix(schema.InboxPrefix(schema.RoleWorker, cfg.WorkerID)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS", "err", err); refusedBy(err) }),
		nats.ClosedHandler(func(nc *nats.Conn) { refusedBy(nc.LastError()) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS connection lost; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted()) }),
		nats.SetCustomDialer(rawtcp.Dialer{D: &net.Dialer{Timeout: nats.DefaultTimeout}})}
	if *tlsCA != "" {
		opts = append(opts, nats.RootCAs(*tlsCA), nats.Secure())
	}
	if *tlsCert != "" || *tlsKey != "" {
		if *tlsCert == "" || *tlsKey == "" {
			return errors.New("-nats-tls-cert and -nats-tls-key go together")
		}
		opts = append(opts, nats.ClientCert(*tlsCert, *tlsKey))
	}
	nc, err := nats.Connect(*natsURL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			return fmt.Errorf("connect %s: the server refused %s (revoked, or signed by another edge's authority: issue new ones with `edge creds worker -id %s`): %w",
				*natsURL, *natsCreds, cfg.WorkerID, err)
		}
		return fmt.Errorf("connect %s: %w", *natsURL, err)
	}
	defer nc.Close()

	if *metricsAddr != "" {
		// Bound before any job is taken: a worker that cannot be watched is stopped, not
		// left running blind with one log line.
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("listen -metrics-addr %s (%s): %w (the edge's own /metrics is on 9102: give each process its own port, or -metrics-addr '' to turn it off)",
				*metricsAddr, schema.EnvName("metrics-addr"), err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	if err := worker.Run(ctx, nc, cfg); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("the NATS server no longer takes %s (revoked, expired, or signed by another edge's authority): issue new ones with `edge creds worker -id %s -out FILE` and restart this worker: %w",
			*natsCreds, cfg.WorkerID, cause)
	}
	// Make sure the last acks and results leave the socket before exit.
	return nc.Drain()
}
