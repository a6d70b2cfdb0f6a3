package server

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"spookat/edge/internal/clientip"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sockets"
)

// Addrs are the addresses a started edge listens on.
type Addrs struct {
	HTTP        string // widget, inbox, API
	Metrics     string // /metrics ("": off)
	NATS        string // the NATS client URL workers and the nats CLI use
	NATSMonitor string // the embedded NATS's monitoring URL ("": off or external)
}

// SetupSlots is how many accepted connections may be waiting for their first answer at once
// (sockets.Listener.Setup): enough to keep both cores busy with handshakes, few enough that
// a reconnect storm never stands in front of established sockets.
var SetupSlots = max(16, 8*runtime.GOMAXPROCS(0))

// listen opens the public listener with its socket budget.
func listen(cfg Config, ips *clientip.Resolver, log *slog.Logger, m *metrics.Set) (*sockets.Listener, error) {
	extra := 0
	if cfg.InprocWorker && cfg.Worker != nil {
		// The in-process worker's outbound sockets share the process's file limit.
		extra = cfg.Worker.ChatInFlight + cfg.Worker.WebhookInFlight + cfg.Worker.EmailInFlight
	}
	budget, limit, err := sockets.Budget(extra)
	if err != nil {
		return nil, fmt.Errorf("read the file limit: %w", err)
	}
	maxSockets := cfg.MaxSockets
	switch {
	case maxSockets == 0:
		maxSockets = budget
	case maxSockets > budget:
		return nil, fmt.Errorf("-max-sockets %d is more than this process can hold: its file limit is %d, less %d kept for SQLite, NATS and outbound posts; lower -max-sockets to %d or raise the limit (ulimit -n, LimitNOFILE= in systemd)",
			maxSockets, limit, int(limit)-budget, budget)
	}
	inner := cfg.Listener
	if inner == nil {
		if inner, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen -addr %s (SPOOKAT_ADDR; make run ADDR=…): %w", cfg.Addr, err)
		}
	}
	m.Gauge("spookat_socket_budget", "Open HTTP and websocket connections allowed (-max-sockets).", func() float64 { return float64(maxSockets) })
	perAddr := cfg.OpeningPerAddr
	switch {
	case perAddr == 0:
		perAddr = 32
	case perAddr < 0:
		perAddr = 0
	}
	l := &sockets.Listener{Listener: inner, Max: maxSockets, Log: log,
		Refused:      m.SocketRefusals.Inc,
		AcceptFailed: m.AcceptErrors.Inc,
		Setup:        SetupSlots,
		FirstByte:    cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout),
		PerAddr:      perAddr,
		Shared:       ips.IsTrusted,
	}
	m.Gauge("spookat_connections_open", "Open HTTP and websocket connections (widget and inbox).", func() float64 { return float64(l.Open()) })
	return l, nil
}

// listenMetrics serves /metrics on addr ("": none); Go's profiles are on -pprof's own address.
func listenMetrics(addr string, m *metrics.Set) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen -metrics-addr %s (SPOOKAT_METRICS_ADDR; make run METRICS_ADDR=…): %w (another edge on this box? give each its own port, or -metrics-addr '' to turn it off)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, Addr: ln.Addr().String()}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

func metricsAddr(s *http.Server) string {
	if s == nil {
		return ""
	}
	return s.Addr
}
