// Package broker starts the embedded NATS JetStream server (or connects to an external one)
// and creates the streams every other part relies on.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"log/slog"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
	"spookat/schema/natsauth"
)

// Options say where NATS is and how the edge proves who it is.
type Options struct {
	Listen   string // embedded server's client address, e.g. 127.0.0.1:4222
	Monitor  string // embedded server's HTTP monitor address; "" for none
	URL      string // external NATS; when set nothing is embedded
	DataDir  string // JetStream store goes under DataDir/nats
	Replicas int    // stream replicas (1 on one box)
	// Limits are the streams' byte budgets, applied on every start (0s: the defaults).
	Limits schema.StreamLimits

	// Auth signs every identity; the embedded server trusts it and nothing else.
	Auth *natsauth.Authority
	// Creds is the edge's credentials file for an external NATS ("": an identity signed by
	// Auth, for a cluster that trusts it; see `edge nats-config`).
	Creds string
	TLS   TLS
	// Insecure allows, for labs, an embedded server beyond loopback without TLS and an
	// external one that asks for no credentials. Loudly logged.
	Insecure bool
	Log      *slog.Logger
	// Refused, if set, counts each client the embedded server turns away, by reason
	// (credentials, tls).
	Refused func(reason string)
	// LazySync lets the embedded JetStream answer a publish before its data is on disk; it
	// syncs every LazySyncInterval instead (the edge's -sync normal). Off, it syncs every
	// write before it answers (-sync full).
	LazySync bool
}

// LazySyncInterval is how often a lazily synced embedded JetStream syncs its files.
const LazySyncInterval = time.Second

// TLS of the NATS client port. Embedded: Cert and Key are the server's, ClientCA (optional)
// the authority client certificates must come from. External: CA verifies the server, Cert
// and Key are the edge's client certificate (optional).
type TLS struct {
	Cert, Key string
	// CA verifies the server of an external NATS (-nats-tls-ca); ClientCA makes the embedded
	// server ask its clients for a certificate it signed (-nats-client-ca). Two names for two
	// jobs: one flag for both locked every worker out of an embedded edge given the CA meant
	// for verifying.
	CA, ClientCA string
}

func (t TLS) enabled() bool { return t.Cert != "" || t.CA != "" }

// Broker is a NATS connection for the edge, with the embedded server when there is one.
type Broker struct {
	srv     *server.Server  // nil with an external NATS
	srvOpts *server.Options // what srv was started with
	opts    Options
	NC      *nats.Conn
	closed  chan struct{} // closed when NC is closed
}

// Start embeds or connects, then creates or updates the streams and buckets.
func Start(ctx context.Context, opts Options) (*Broker, error) {
	if opts.Auth == nil {
		return nil, errors.New("broker: no NATS authority")
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	b := &Broker{opts: opts, closed: make(chan struct{})}
	if opts.URL == "" {
		if err := b.embed(); err != nil {
			return nil, err
		}
	} else if opts.TLS.ClientCA != "" {
		return nil, errors.New("-nats-client-ca asks the embedded NATS's clients for certificates; with -nats-url the cluster's own configuration does that (verify its servers with -nats-tls-ca)")
	}
	var self []nats.Option
	if opts.URL != "" && opts.Creds != "" {
		self = []nats.Option{nats.UserCredentials(opts.Creds), nats.CustomInboxPrefix(schema.InboxPrefix(schema.RoleEdge, ""))}
	} else {
		id, err := opts.Auth.Issue(schema.RoleEdge, "")
		if err != nil {
			return nil, err
		}
		self = id.Options()
	}
	self = append(self, nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }))
	nc, err := b.connect("spookat-edge", self...)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.NC = nc
	if b.srv == nil && !nc.AuthRequired() {
		if !opts.Insecure {
			b.Close()
			return nil, fmt.Errorf("the NATS server at -nats-url %s accepts clients without credentials: anyone who reaches it could read every job and site secret; "+
				"configure it to trust this edge (edge nats-config -out auth.conf, then include auth.conf in its configuration), or pass -nats-insecure in a lab", opts.URL)
		}
		opts.Log.Warn("INSECURE: the external NATS server asks for no credentials (-nats-insecure)", "url", opts.URL)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Close()
		return nil, err
	}
	replicas := max(opts.Replicas, 1)
	if err := Settle(ctx, opts.Log, "create streams", func(ctx context.Context) error {
		return schema.EnsureStreams(ctx, js, replicas, opts.Limits)
	}); err != nil {
		b.Close()
		return nil, budgetError(err, opts.Limits)
	}
	return b, nil
}

// errCodeStorageExceeded is nats-server's JSStorageResourcesExceededErr ("insufficient storage
// resources available"), which nats.go has no name for.
const errCodeStorageExceeded jetstream.ErrorCode = 10047

// budgetError names the flags when JetStream cannot reserve the streams' byte budgets: its
// own bound is 75 % of the free disk (embedded) or the server's max_file_store.
func budgetError(err error, l schema.StreamLimits) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != errCodeStorageExceeded && !strings.Contains(api.Description, "insufficient storage") {
		return err
	}
	l = l.WithDefaults()
	return fmt.Errorf("%w: JetStream has less disk than the stream budgets ask for (-jobs-max-bytes %s, -results-max-bytes %s, -dead-max-bytes %s, -inbound-max-bytes %s); "+
		"free disk under the data directory or lower them, e.g. -results-max-bytes 256MiB", err,
		FormatBytes(l.JobsMaxBytes), FormatBytes(l.ResultsMaxBytes), FormatBytes(l.DeadMaxBytes), FormatBytes(l.InboundMaxBytes))
}

// SettleTimeout bounds how long Settle waits for a cluster that is still electing leaders.
const SettleTimeout = 90 * time.Second

// Settle runs fn until it succeeds, while JetStream answers "not yet" (a cluster just started
// or electing a leader: timeouts, no responders), up to SettleTimeout. Other errors return
// at once.
func Settle(ctx context.Context, log *slog.Logger, what string, fn func(ctx context.Context) error) error {
	deadline := time.Now().Add(SettleTimeout)
	warned := false
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !notYet(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !warned {
			log.Info("JetStream not ready yet; retrying", "what", what, "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// notYet reports whether err is JetStream's "not yet" while a cluster forms. A node that has
// just started answers "JetStream not enabled for account" (10039) until the account's
// JetStream is up: an edge started with its cluster exited on it (TestClusterLosesANodeUnderLoad).
func notYet(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// loopback reports whether host only listens on this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (b *Broker) embed() error {
	host, port, err := splitHostPort(b.opts.Listen, 4222)
	if err != nil {
		return fmt.Errorf("-nats-listen: %w", err)
	}
	o := &server.Options{
		ServerName: "spookat-edge",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(b.opts.DataDir, "nats"),
		SyncAlways: !b.opts.LazySync,
		// NATS's default is two minutes: jobs a cut could take for that long after the job
		// publisher's watermark passed them.
		SyncInterval: LazySyncInterval,
		NoSigs:       true, // the edge handles signals
		NoLog:        true,
		MaxPayload:   1 << 20,
	}
	if err := b.trust(o); err != nil {
		return fmt.Errorf("embedded NATS auth: %w", err)
	}
	t := b.opts.TLS
	switch {
	case t.CA != "":
		return errors.New("-nats-tls-ca verifies the server of an external NATS (-nats-url); the embedded NATS asks its clients for certificates with -nats-client-ca, and serves TLS with -nats-tls-cert and -nats-tls-key")
	case t.Cert != "" || t.Key != "":
		if t.Cert == "" || t.Key == "" {
			return errors.New("-nats-tls-cert and -nats-tls-key go together (the embedded server's certificate and its key)")
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.Cert, KeyFile: t.Key, CaFile: t.ClientCA, Verify: t.ClientCA != ""})
		if err != nil {
			return fmt.Errorf("-nats-tls-cert/-nats-tls-key: %w", err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, t.ClientCA != "", 2
	case t.ClientCA != "":
		return errors.New("-nats-client-ca without -nats-tls-cert/-nats-tls-key: the embedded server needs its own certificate to serve TLS")
	case !loopback(host):
		if !b.opts.Insecure {
			return fmt.Errorf("-nats-listen %s reaches beyond this machine without TLS: workers' credentials and every job would cross the network in clear; "+
				"pass -nats-tls-cert and -nats-tls-key (and give workers -nats-tls-ca), listen on 127.0.0.1, or pass -nats-insecure in a lab", b.opts.Listen)
		}
		b.opts.Log.Warn("INSECURE: embedded NATS listens beyond loopback without TLS (-nats-insecure)", "listen", b.opts.Listen)
	}
	if b.opts.Monitor != "" {
		mhost := ""
		if mhost, o.HTTPPort, err = splitHostPort(b.opts.Monitor, 8222); err != nil {
			return fmt.Errorf("-nats-monitor: %w", err)
		}
		if !loopback(mhost) && !b.opts.Insecure {
			return fmt.Errorf("-nats-monitor %s reaches beyond this machine: NATS's monitoring pages need no credentials and list every connection and stream; "+
				"keep it on 127.0.0.1 (and reach it over ssh), or pass -nats-insecure in a lab", b.opts.Monitor)
		}
		o.HTTPHost = mhost
	}
	if port > 0 { // say plainly when the port is taken, rather than time out below
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("embedded NATS cannot listen on -nats-listen %s:%d (SPOOKAT_NATS_LISTEN; make run NATS_ADDR=…): %w", host, port, err)
		}
		ln.Close()
	}
	if o.HTTPPort > 0 { // the monitor's own port, named by its own flag
		ln, err := net.Listen("tcp", net.JoinHostPort(o.HTTPHost, strconv.Itoa(o.HTTPPort)))
		if err != nil {
			return fmt.Errorf("embedded NATS monitor cannot listen on -nats-monitor %s (SPOOKAT_NATS_MONITOR; make run NATS_MONITOR=…): %w (pick another port, or -nats-monitor '' to turn it off)", b.opts.Monitor, err)
		}
		ln.Close()
	}
	// Port 0 asks for any free port (nats-server spells it -1; its 0 means 4222).
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	if b.opts.Monitor != "" && o.HTTPPort == 0 {
		o.HTTPPort = server.RANDOM_PORT
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	srv.SetLogger(&serverLog{log: b.opts.Log, refused: b.opts.Refused}, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return errors.New("embedded NATS did not start within 10s (is a port in use? see -nats-listen and -nats-monitor)")
	}
	b.srv, b.srvOpts = srv, o
	return nil
}

// Connect opens a new connection as id (the in-process worker): in-process to the embedded
// server (no TCP), or to the external URL.
func (b *Broker) Connect(name string, id *natsauth.Identity, extra ...nats.Option) (*nats.Conn, error) {
	return b.connect(name, append(id.Options(), extra...)...)
}

func (b *Broker) connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	log := b.opts.Log.With("nats_conn", name)
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second),
		// A subject its permissions lack shows in the log, not as a silent stall.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS", "err", err) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS connection lost; reconnecting (visitors' messages are still committed and acked)", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted()) }),
	}, extra...)
	if b.srv != nil {
		opts = append(opts, nats.InProcessServer(b.srv))
		return nats.Connect("", opts...)
	}
	if t := b.opts.TLS; t.CA != "" {
		opts = append(opts, nats.RootCAs(t.CA))
	}
	if t := b.opts.TLS; t.Cert != "" {
		opts = append(opts, nats.ClientCert(t.Cert, t.Key))
	}
	if b.opts.TLS.enabled() {
		opts = append(opts, nats.Secure())
	}
	nc, err := nats.Connect(b.opts.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to -nats-url %s: %w", b.opts.URL, err)
	}
	return nc, nil
}

// trust makes the embedded server trust the authority's operator, with its accounts in a
// memory resolver, so it accepts only identities the authority signed.
func (b *Broker) trust(o *server.Options) error {
	oc, sys, accounts, err := b.opts.Auth.Trust()
	if err != nil {
		return err
	}
	res := &server.MemAccResolver{}
	for pub, claims := range accounts {
		if err := res.Store(pub, claims); err != nil {
			return err
		}
	}
	o.TrustedOperators = []*jwt.OperatorClaims{oc}
	o.AccountResolver = res
	o.SystemAccount = sys
	return nil
}

// ApplyAuth hands a changed account JWT (a revocation) to the embedded server. With an
// external NATS it returns false: the cluster applies it when reloaded with the new
// `edge nats-config`.
func (b *Broker) ApplyAuth() (bool, error) {
	if b.srv == nil {
		return false, nil
	}
	_, _, accounts, err := b.opts.Auth.Trust()
	if err != nil {
		return true, err
	}
	for pub, claims := range accounts {
		ac, err := jwt.DecodeAccountClaims(claims)
		if err != nil {
			return true, err
		}
		if r, ok := b.srv.AccountResolver().(*server.MemAccResolver); ok {
			if err := r.Store(pub, claims); err != nil {
				return true, err
			}
		}
		acc, err := b.srv.LookupAccount(pub)
		if err != nil {
			return true, err
		}
		// Connections of revoked users are closed at once and cannot come back.
		b.srv.UpdateAccountClaims(acc, ac)
	}
	return true, nil
}

// Embedded reports whether the NATS server runs inside this process.
func (b *Broker) Embedded() bool { return b.srv != nil }

// ClientURL is the URL other processes (workers, the nats CLI) use.
func (b *Broker) ClientURL() string {
	if b.srv != nil {
		return b.srv.ClientURL()
	}
	return b.opts.URL
}

// MonitorURL is the embedded server's monitoring address as a URL ("": none, or external).
func (b *Broker) MonitorURL() string {
	if b.srv == nil {
		return ""
	}
	if a := b.srv.MonitorAddr(); a != nil {
		return "http://" + a.String()
	}
	return ""
}

// Ready reports whether the connection is up.
func (b *Broker) Ready() bool { return b.NC != nil && b.NC.IsConnected() }

// Close drains the connection and shuts the embedded server down.
func (b *Broker) Close() {
	if b.NC != nil {
		if b.NC.Drain() == nil {
			select {
			case <-b.closed:
			case <-time.After(5 * time.Second):
				b.NC.Close()
			}
		}
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
}

func splitHostPort(addr string, defPort int) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", defPort, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", 0, err
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}

// DefaultStreamStatsEvery is how often WatchStreams reads the streams' use: a stream info
// request each, cheap, and often enough for a 5-minute alert.
const DefaultStreamStatsEvery = 15 * time.Second

// WatchStreams reads the info of JOBS, RESULTS and DEAD now and every interval (0:
// DefaultStreamStatsEvery) until ctx is done, and hands each stream's bytes, byte budget
// and messages to fn. A stream it cannot read (NATS away) keeps its last values.
func (b *Broker) WatchStreams(ctx context.Context, every time.Duration, fn func(stream string, bytes, maxBytes, msgs uint64)) {
	if every <= 0 {
		every = DefaultStreamStatsEvery
	}
	js, err := jetstream.New(b.NC)
	if err != nil {
		b.opts.Log.Warn("stream use is not exported to /metrics", "err", err)
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, name := range []string{schema.StreamJobs, schema.StreamResults, schema.StreamDead, schema.StreamInbound} {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s, err := js.Stream(rctx, name)
			if err == nil {
				info := s.CachedInfo()
				fn(name, info.State.Bytes, uint64(max(info.Config.MaxBytes, 0)), info.State.Msgs)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
