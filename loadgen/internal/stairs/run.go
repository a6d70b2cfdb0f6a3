// Package stairs is `loadgen run`: widget websockets against a running edge, real frames at
// a fixed aggregate rate in stairs, ack latency measured from each message's intended send
// time (HdrHistogram, no coordinated omission), and per stair the CPU and memory of the edge,
// the workers and the generator itself, the edge's Go scheduling latency and, with the Slack
// mock, deliveries and how long their backlog took to drain.
package stairs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gorilla/websocket"

	"spookat/loadgen/internal/pace"
	"spookat/loadgen/internal/procfs"
	"spookat/loadgen/internal/prom"
	"spookat/schema"
)

// Config is one run.
type Config struct {
	EdgeURL    string   // http://127.0.0.1:8080
	MetricsURL string   // the edge's /metrics ("": EdgeURL + "/metrics", where edges before -metrics-addr served it)
	Keys       []string // site keys; sockets are spread over them round-robin
	Sockets    int
	Stairs     []float64     // aggregate messages per second, one per stair
	Step       time.Duration // length of a stair
	Warmup     time.Duration // start of each stair left out of the figures
	Drain      time.Duration // after the last stair: how long to wait for outstanding acks; with the Slack mock, for its backlog after each stair
	Tick       time.Duration // pacing batch interval (default 1 ms)
	Senders    int           // sender goroutines, each owning a share of the sockets (default 4)
	Origin     string        // Origin header (default http://loadgen.test)
	// Page sends a page frame after each hello, as the widget does: the edge closes a socket
	// that says nothing after its hello. Off for a server that does not know the frame.
	Page      bool
	TextBytes int // length of each message's text (default 48)
	EdgePID   int // 0: no edge CPU/RSS figures
	// ServerName names EdgePID's figures in the report ("": edge); a server other than the
	// edge (a peer) has no /metrics, so ServerName set also means none is scraped.
	ServerName string
	WorkerPIDs []int
	SlackMock  string // base URL of the Slack mock; empty: no delivery figures
	Setup      string // a label for the report (compare names its setups)
	Log        io.Writer
	// Operators, when set, each log in and keep their inbox websocket open during the run,
	// receiving the live fan-out of their sites (see SeedOperators).
	Operators []Operator
	// OnStair, when set, is called as stair j (from 0) starts; end is when its sending stops.
	OnStair func(j int, start, end time.Time)
}

func (c *Config) defaults() error {
	if c.EdgeURL == "" {
		c.EdgeURL = "http://127.0.0.1:8080"
	}
	if len(c.Keys) == 0 {
		return errors.New("stairs: no site keys (seed some first)")
	}
	if c.Sockets <= 0 {
		c.Sockets = 1000
	}
	if len(c.Stairs) == 0 {
		return errors.New("stairs: no stairs")
	}
	for _, r := range c.Stairs {
		if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("stairs: bad rate %v", r)
		}
	}
	if c.Step <= 0 {
		c.Step = 60 * time.Second
	}
	if c.Warmup < 0 || c.Warmup >= c.Step {
		return fmt.Errorf("stairs: warmup %v must be shorter than the step %v", c.Warmup, c.Step)
	}
	if c.Drain <= 0 {
		c.Drain = 30 * time.Second
	}
	if c.Tick <= 0 {
		c.Tick = time.Millisecond
	}
	if c.Senders <= 0 {
		c.Senders = 4
	}
	if c.Senders > c.Sockets {
		c.Senders = c.Sockets
	}
	if c.Origin == "" {
		c.Origin = "http://loadgen.test"
	}
	if c.TextBytes <= 0 {
		c.TextBytes = 48
	}
	if c.TextBytes > schema.MaxTextRunes {
		c.TextBytes = schema.MaxTextRunes
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

const histStripes = 8

// stairStats collects one stair's figures; every field written on the hot path is atomic or
// behind a striped lock.
type stairStats struct {
	rate             float64
	winStart, winEnd int64 // measured window, ns since the run's base
	sent, acked      atomic.Int64
	ackedInWindow    atomic.Int64
	errMu            sync.Mutex
	errs             map[string]int64
	lat              [histStripes]struct {
		sync.Mutex
		h *hdr.Histogram
	}
	lag []*hdr.Histogram // per sender: intended → actual write, µs
}

func newHist() *hdr.Histogram { return hdr.New(1, 120_000_000, 3) } // 1 µs … 120 s

func (st *stairStats) addErr(code string, n int64) {
	st.errMu.Lock()
	st.errs[code] += n
	st.errMu.Unlock()
}

type pend struct {
	intended int64 // ns since base
	stair    int32
}

type socket struct {
	idx     int
	c       *websocket.Conn
	prefix  []byte // "<run>-<idx>-": client ids are prefix + seq in base 36
	wbuf    []byte
	seq     uint64
	mu      sync.Mutex
	pending map[uint64]pend
	dead    atomic.Bool
	rbuf    []byte
}

type runner struct {
	cfg      Config
	base     time.Time
	stairs   []*stairStats
	cur      atomic.Int32
	pending  atomic.Int64
	sent     atomic.Int64
	acked    atomic.Int64
	dupAcks  atomic.Int64
	foreign  atomic.Int64 // acks or errors naming a client id this run did not make
	pushed   atomic.Int64 // message frames the server pushed (live messages)
	closed   atomic.Int64 // sockets the server closed
	lost     atomic.Int64 // messages unanswered when their socket closed
	closing  atomic.Bool
	text     []byte
	sockets  []*socket
	http     *http.Client
	totalErr sync.Map // code → *atomic.Int64, over the run

	inboxLock   sync.Mutex
	inboxes     []*websocket.Conn // operators' inbox websockets (Config.Operators)
	inboxFrames atomic.Int64      // message events they received
	inboxClosed atomic.Int64      // of them the server closed during the run
}

func (r *runner) now() int64 { return int64(time.Since(r.base)) }

// Run connects the sockets, walks the stairs and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := newRunner(cfg)
	r.text = filler(cfg.TextBytes)
	for _, rate := range cfg.Stairs {
		st := &stairStats{rate: rate, errs: map[string]int64{}}
		for i := range st.lat {
			st.lat[i].h = newHist()
		}
		for range cfg.Senders {
			st.lag = append(st.lag, newHist())
		}
		r.stairs = append(r.stairs, st)
	}
	rep := &Report{
		Setup:      cfg.Setup,
		StartedAt:  time.Now().UTC(),
		Edge:       cfg.EdgeURL,
		Sites:      len(cfg.Keys),
		Sockets:    cfg.Sockets,
		Step:       cfg.Step.String(),
		Warmup:     cfg.Warmup.String(),
		Tick:       cfg.Tick.String(),
		Senders:    cfg.Senders,
		EdgePID:    cfg.EdgePID,
		WorkerPIDs: cfg.WorkerPIDs,
		Machine:    machine(),
	}

	t0 := time.Now()
	if err := r.connect(ctx); err != nil {
		r.closeAll()
		return nil, err
	}
	rep.SocketsOpen = len(r.sockets)
	rep.ConnectSeconds = time.Since(t0).Seconds()
	fmt.Fprintf(cfg.Log, "loadgen: %d sockets open over %d sites in %.1fs\n", len(r.sockets), min(len(cfg.Keys), cfg.Sockets), rep.ConnectSeconds)
	if len(cfg.Operators) > 0 {
		if err := r.openInboxes(ctx); err != nil {
			r.closeAll()
			return nil, err
		}
		rep.InboxSockets = len(r.inboxes)
		fmt.Fprintf(cfg.Log, "loadgen: %d operator inboxes open\n", len(r.inboxes))
	}

	metricsURL := cfg.metricsURL()
	if metricsURL == "" {
		rep.Notes = append(rep.Notes, cfg.ServerName+" serves no metrics: no saved-message cross-check, no scheduler latency")
	} else if m, err := prom.Scrape(ctx, r.http, metricsURL); err == nil {
		v := m.Sum("spookat_messages_saved_total")
		rep.SavedBefore = &v
	} else {
		rep.Notes = append(rep.Notes, "metrics: "+err.Error())
	}
	var slackBase int64 = -1
	if cfg.SlackMock != "" {
		if n, err := slackCount(ctx, r.http, cfg.SlackMock); err == nil {
			slackBase = n
		} else {
			rep.Notes = append(rep.Notes, "slack mock: "+err.Error())
		}
	}

	// Senders: shard s owns sockets s, s+S, …
	plans := make([]chan int, cfg.Senders)
	var sendWG sync.WaitGroup
	var senderWG sync.WaitGroup
	starts := make([]time.Time, len(cfg.Stairs))
	for s := range cfg.Senders {
		plans[s] = make(chan int, 1)
		var mine []*socket
		for i := s; i < len(r.sockets); i += cfg.Senders {
			mine = append(mine, r.sockets[i])
		}
		senderWG.Add(1)
		go func() {
			defer senderWG.Done()
			r.sender(ctx, s, mine, plans[s], starts, &sendWG)
		}()
	}

	var stop error
	for j, st := range r.stairs {
		if ctx.Err() != nil {
			stop = ctx.Err()
			break
		}
		start := time.Now().Add(2 * time.Millisecond)
		starts[j] = start
		st.winStart = int64(start.Add(cfg.Warmup).Sub(r.base))
		st.winEnd = int64(start.Add(cfg.Step).Sub(r.base))
		r.cur.Store(int32(j))
		sendWG.Add(cfg.Senders)
		for _, p := range plans {
			p <- j
		}
		fmt.Fprintf(cfg.Log, "loadgen: stair %d/%d: %.0f msg/s for %v\n", j+1, len(r.stairs), st.rate, cfg.Step)
		if cfg.OnStair != nil {
			cfg.OnStair(j, start, start.Add(cfg.Step))
		}
		inboxBefore := r.inboxFrames.Load()
		sr := r.measureStair(ctx, j, st, start, metricsURL, slackBase)
		sendWG.Wait()
		if len(r.inboxes) > 0 {
			n := r.inboxFrames.Load() - inboxBefore
			sr.InboxFrames = &n
		}
		sr.finish(st) // a first look for the log line; finished again once every ack is in
		if cfg.SlackMock != "" && slackBase >= 0 {
			r.drainSlack(ctx, &sr, slackBase)
		}
		rep.Stairs = append(rep.Stairs, sr)
		fmt.Fprintln(cfg.Log, "loadgen:", sr.oneLine())
	}
	for _, p := range plans {
		close(p)
	}
	senderWG.Wait()

	// Outstanding acks.
	deadline := time.Now().Add(cfg.Drain)
	for r.pending.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	// An inbox gets a message after its sender's ack: give the last ones a moment.
	for deadline := time.Now().Add(2 * time.Second); len(r.inboxes) > 0 && r.inboxFrames.Load() < r.acked.Load() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// Acks of the last stair that came after its window still count in its totals.
	for j := range rep.Stairs {
		rep.Stairs[j].finish(r.stairs[j])
	}
	r.closeAll()

	if m, err := scrape(context.Background(), r.http, metricsURL); err == nil {
		v := m.Sum("spookat_messages_saved_total")
		rep.SavedAfter = &v
		if rep.SavedBefore != nil {
			d := v - *rep.SavedBefore
			rep.SavedDelta = &d
		}
	}
	rep.Sent = r.sent.Load()
	rep.Acked = r.acked.Load()
	rep.Unacked = r.pending.Load()
	rep.LostOnClose = r.lost.Load()
	rep.DuplicateAcks = r.dupAcks.Load()
	rep.ForeignFrames = r.foreign.Load()
	rep.PushedMessages = r.pushed.Load()
	rep.InboxFrames = r.inboxFrames.Load()
	if n := r.inboxClosed.Load(); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the edge closed %d operator inbox sockets during the run", n))
	}
	rep.SocketsClosed = r.closed.Load()
	rep.Errors = map[string]int64{}
	r.totalErr.Range(func(k, v any) bool {
		rep.Errors[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	if rep.SavedDelta != nil && int64(*rep.SavedDelta) != rep.Acked {
		rep.Notes = append(rep.Notes, fmt.Sprintf("cross-check: the edge counted %d messages saved, loadgen %d acks (other traffic, or lost acks)", int64(*rep.SavedDelta), rep.Acked))
	}
	if rep.LostOnClose > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d messages got no answer because their socket closed (stored or not: unknown)", rep.LostOnClose))
	}
	if rep.Unacked > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d messages were neither acked nor refused within %v of the end", rep.Unacked, cfg.Drain))
	}
	return rep, stop
}

// metricsURL is where the server's metrics are ("": a server without them, a peer).
func (c *Config) metricsURL() string {
	switch {
	case c.ServerName != "":
		return ""
	case c.MetricsURL != "":
		return c.MetricsURL
	}
	return strings.TrimRight(c.EdgeURL, "/") + "/metrics"
}

func newRunner(cfg Config) *runner {
	return &runner{cfg: cfg, base: time.Now(), http: &http.Client{Timeout: 5 * time.Second}}
}

// scrape reads the server's metrics; url "" is a server without them.
func scrape(ctx context.Context, c *http.Client, url string) (*prom.Metrics, error) {
	if url == "" {
		return nil, errors.New("no metrics")
	}
	return prom.Scrape(ctx, c, url)
}

func (r *runner) countErr(st *stairStats, code string) {
	st.addErr(code, 1)
	v, ok := r.totalErr.Load(code)
	if !ok {
		v, _ = r.totalErr.LoadOrStore(code, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// connect opens cfg.Sockets widget websockets, 64 at a time, each waiting for its hello.
func (r *runner) connect(ctx context.Context) error {
	u, err := url.Parse(r.cfg.EdgeURL)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return fmt.Errorf("stairs: edge URL %q: want http://host:port", r.cfg.EdgeURL)
	}
	u.Path = "/v1/widget/ws"
	runID := randomID(4)
	d := &websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   2048,
		WriteBufferSize:  256 + r.cfg.TextBytes + 64,
	}
	hdrs := http.Header{"Origin": {r.cfg.Origin}}

	socks := make([]*socket, r.cfg.Sockets)
	errs := make([]error, r.cfg.Sockets)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range r.cfg.Sockets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			q := url.Values{"site": {r.cfg.Keys[i%len(r.cfg.Keys)]}}
			uu := *u
			uu.RawQuery = q.Encode()
			var c *websocket.Conn
			var err error
			for attempt := 0; attempt < 3; attempt++ {
				var resp *http.Response
				c, resp, err = d.DialContext(ctx, uu.String(), hdrs)
				if err == nil {
					break
				}
				if resp != nil {
					body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					resp.Body.Close()
					err = fmt.Errorf("%w: %s %s", err, resp.Status, strings.TrimSpace(string(body)))
					if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound {
						break
					}
				}
				time.Sleep(time.Duration(100*(attempt+1)) * time.Millisecond)
			}
			if err != nil {
				errs[i] = err
				return
			}
			c.SetReadLimit(1 << 20)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, hello, err := c.ReadMessage()
			if err != nil || frameType(hello) != kindHello {
				c.Close()
				errs[i] = fmt.Errorf("no hello (%v): %.200s", err, hello)
				return
			}
			c.SetReadDeadline(time.Time{})
			if r.cfg.Page {
				if err := c.WriteMessage(websocket.TextMessage, pageFrame(r.cfg.Origin)); err != nil {
					c.Close()
					errs[i] = fmt.Errorf("page frame: %w", err)
					return
				}
			}
			socks[i] = &socket{
				idx:     i,
				c:       c,
				prefix:  []byte(runID + "-" + strconv.FormatInt(int64(i), 36) + "-"),
				pending: make(map[uint64]pend, 16),
				rbuf:    make([]byte, 0, 512),
			}
		}()
	}
	wg.Wait()
	var first error
	failed := 0
	for i, s := range socks {
		if s != nil {
			r.sockets = append(r.sockets, s)
		} else {
			failed++
			if first == nil {
				first = errs[i]
			}
		}
	}
	if len(r.sockets) == 0 {
		return fmt.Errorf("stairs: no socket opened: %v", first)
	}
	if failed > 0 {
		fmt.Fprintf(r.cfg.Log, "loadgen: %d of %d sockets failed to open, first: %v\n", failed, r.cfg.Sockets, first)
	}
	for _, s := range r.sockets {
		go r.reader(s)
	}
	return nil
}

func (r *runner) closeAll() {
	r.closing.Store(true)
	r.inboxLock.Lock()
	for _, c := range r.inboxes {
		c.Close()
	}
	r.inboxLock.Unlock()
	for _, s := range r.sockets {
		s.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(100*time.Millisecond))
		s.c.Close()
	}
}

// sender walks the stairs for its share of the sockets.
func (r *runner) sender(ctx context.Context, shard int, socks []*socket, plans <-chan int, starts []time.Time, wg *sync.WaitGroup) {
	next := 0
	for j := range plans {
		st := r.stairs[j]
		start := starts[j]
		p := pace.NewPacer(pace.Schedule{Start: start, Rate: st.rate / float64(r.cfg.Senders), Tick: r.cfg.Tick}, start.Add(r.cfg.Step))
		lag := st.lag[shard]
		for {
			b, ok := p.Next(ctx.Done())
			if !ok {
				break
			}
			for i := b.From; i < b.To; i++ {
				intended := int64(p.S.Slot(i).Sub(r.base))
				var s *socket
				for range socks {
					c := socks[next]
					next++
					if next == len(socks) {
						next = 0
					}
					if !c.dead.Load() {
						s = c
						break
					}
				}
				st.sent.Add(1)
				r.sent.Add(1)
				if s == nil {
					r.countErr(st, "no_socket")
					continue
				}
				r.send(s, intended, int32(j), st)
				l := (r.now() - intended) / 1000
				if l < 1 {
					l = 1
				}
				lag.RecordValue(min(l, lag.HighestTrackableValue()))
			}
		}
		p.Stop()
		wg.Done()
	}
}

func (r *runner) send(s *socket, intended int64, stair int32, st *stairStats) {
	s.mu.Lock()
	if s.dead.Load() { // checked under the lock the reader takes to clear pending on close
		s.mu.Unlock()
		r.countErr(st, "send_failed")
		return
	}
	seq := s.seq
	s.seq++
	s.pending[seq] = pend{intended: intended, stair: stair}
	s.mu.Unlock()
	r.pending.Add(1)
	s.wbuf = appendMessageFrame(s.wbuf[:0], s.prefix, seq, r.text)
	// gorilla only stores the deadline and applies it on each frame anyway: free to set. A
	// server that stops reading fails the socket after 10 s instead of hanging the sender.
	s.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := s.c.WriteMessage(websocket.TextMessage, s.wbuf); err != nil {
		s.mu.Lock()
		_, still := s.pending[seq]
		delete(s.pending, seq)
		s.mu.Unlock()
		if still {
			r.pending.Add(-1)
			r.countErr(st, "send_failed")
		}
		s.dead.Store(true)
	}
}

func (r *runner) reader(s *socket) {
	for {
		_, rd, err := s.c.NextReader()
		if err != nil {
			s.dead.Store(true)
			if !r.closing.Load() {
				r.closed.Add(1)
				r.countErr(r.stairs[r.cur.Load()], "socket_closed")
			}
			// Messages still waiting on this socket will get no answer: they may or may not
			// have been stored. Count them apart so the drain does not wait for them.
			s.mu.Lock()
			n := int64(len(s.pending))
			clear(s.pending)
			s.mu.Unlock()
			r.pending.Add(-n)
			r.lost.Add(n)
			return
		}
		s.rbuf, err = readAll(rd, s.rbuf[:0])
		if err != nil {
			continue
		}
		r.handle(s, s.rbuf)
	}
}

func readAll(rd io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (r *runner) handle(s *socket, frame []byte) {
	switch frameType(frame) {
	case kindAck:
		id, _, _ := jsonField(frame, "client_id")
		seq, ok := clientSeq(id, s.prefix)
		if !ok {
			r.foreign.Add(1)
			return
		}
		now := r.now()
		s.mu.Lock()
		p, found := s.pending[seq]
		if found {
			delete(s.pending, seq)
		}
		s.mu.Unlock()
		if !found {
			r.dupAcks.Add(1)
			return
		}
		r.pending.Add(-1)
		r.acked.Add(1)
		st := r.stairs[p.stair]
		st.acked.Add(1)
		if cur := r.stairs[r.cur.Load()]; now >= cur.winStart && now < cur.winEnd {
			cur.ackedInWindow.Add(1)
		}
		if p.intended >= st.winStart {
			us := (now - p.intended) / 1000
			if us < 1 {
				us = 1
			}
			l := &st.lat[s.idx%histStripes]
			l.Lock()
			l.h.RecordValue(min(us, l.h.HighestTrackableValue()))
			l.Unlock()
		}
	case kindError:
		code, _, _ := jsonField(frame, "code")
		c := string(code)
		if c == "" {
			c = "error"
		}
		id, _, hasID := jsonField(frame, "client_id")
		st := r.stairs[r.cur.Load()]
		if hasID {
			seq, ok := clientSeq(id, s.prefix)
			if !ok {
				r.foreign.Add(1)
			} else {
				s.mu.Lock()
				p, found := s.pending[seq]
				if found {
					delete(s.pending, seq)
				}
				s.mu.Unlock()
				if found {
					r.pending.Add(-1)
					st = r.stairs[p.stair]
				}
			}
		}
		r.countErr(st, c)
	case kindMessage:
		r.pushed.Add(1)
	}
}

// procSample is a process's CPU time and memory at one instant.
type procSample struct {
	cpu time.Duration
	ok  bool
}

type tracked struct {
	name string
	pid  int // 0: this process
}

func (r *runner) tracked() []tracked {
	var out []tracked
	if r.cfg.EdgePID > 0 {
		name := "edge"
		if r.cfg.ServerName != "" {
			name = r.cfg.ServerName
		}
		out = append(out, tracked{name, r.cfg.EdgePID})
	}
	for i, p := range r.cfg.WorkerPIDs {
		name := "worker"
		if len(r.cfg.WorkerPIDs) > 1 {
			name = "worker" + strconv.Itoa(i+1)
		}
		out = append(out, tracked{name, p})
	}
	return out
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureStair samples at the window's start and end and returns the stair's figures (the
// latency and totals are completed by finish once the acks are in).
func (r *runner) measureStair(ctx context.Context, j int, st *stairStats, start time.Time, metricsURL string, slackBase int64) StairReport {
	sr := StairReport{Stair: j + 1, TargetRate: st.rate}
	procs := r.tracked()
	sleepUntil(ctx, r.base.Add(time.Duration(st.winStart)))

	before := make([]procSample, len(procs))
	for i, p := range procs {
		if c, err := procfs.CPU(p.pid); err == nil {
			before[i] = procSample{c, true}
		}
	}
	statBefore, _ := procfs.ReadProcStat()
	selfBefore := selfCPU()
	wallBefore := time.Now()
	var schedBefore []prom.Bucket
	var savedBefore float64
	var haveMetrics bool
	if m, err := scrape(ctx, r.http, metricsURL); err == nil {
		schedBefore = m.Histogram("go_sched_latencies_seconds")
		savedBefore = m.Sum("spookat_messages_saved_total")
		haveMetrics = true
	}
	var slackBefore int64 = -1
	if slackBase >= 0 {
		slackBefore, _ = slackCount(ctx, r.http, r.cfg.SlackMock)
	}

	// RSS peaks, sampled every 250 ms through the window.
	peaks := make([]uint64, len(procs))
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			for i, p := range procs {
				if m, err := procfs.ReadMem(p.pid); err == nil && m.RSS > peaks[i] {
					peaks[i] = m.RSS
				}
			}
			select {
			case <-t.C:
			case <-stopRSS:
				return
			}
		}
	}()

	sleepUntil(ctx, r.base.Add(time.Duration(st.winEnd)))
	wall := time.Since(wallBefore)
	close(stopRSS)
	<-rssDone
	selfAfter := selfCPU()
	if statAfter, err := procfs.ReadProcStat(); err == nil && statBefore != nil {
		sr.CPUs = procfs.Use(statBefore, statAfter)
	}
	acks := st.ackedInWindow.Load()
	sr.WindowSeconds = wall.Seconds()
	sr.AckedRate = float64(acks) / wall.Seconds()
	perMsg := func(d time.Duration) *float64 {
		if acks == 0 {
			return nil
		}
		v := float64(d.Microseconds()) / float64(acks)
		return &v
	}
	for i, p := range procs {
		pr := ProcReport{Name: p.name, PID: p.pid}
		if c, err := procfs.CPU(p.pid); err == nil && before[i].ok {
			d := c - before[i].cpu
			pct := 100 * d.Seconds() / wall.Seconds()
			pr.CPUPercent = &pct
			pr.CPUMicrosPerMsg = perMsg(d)
		}
		if m, err := procfs.ReadMem(p.pid); err == nil {
			if m.RSS > peaks[i] {
				peaks[i] = m.RSS
			}
			pr.RSSPeakMB = mb(peaks[i])
			pr.HWMMB = mb(m.HWM)
		}
		sr.Procs = append(sr.Procs, pr)
	}
	d := selfAfter - selfBefore
	pct := 100 * d.Seconds() / wall.Seconds()
	lg := ProcReport{Name: "loadgen", PID: os.Getpid(), CPUPercent: &pct, CPUMicrosPerMsg: perMsg(d)}
	if m, err := procfs.ReadMem(0); err == nil {
		lg.RSSPeakMB = mb(m.RSS)
		lg.HWMMB = mb(m.HWM)
	}
	sr.Loadgen = lg
	sr.GeneratorBottleneck = sr.AckedRate < 0.95*st.rate && pct > 90
	sr.loadAvg = loadAvg()

	if haveMetrics {
		if m, err := prom.Scrape(ctx, r.http, metricsURL); err == nil {
			if after := m.Histogram("go_sched_latencies_seconds"); after != nil {
				delta := prom.Delta(schedBefore, after)
				if q := prom.Quantile(0.99, delta); !math.IsNaN(q) {
					ms := q * 1000
					sr.SchedP99MS = &ms
					sr.SchedP99AtLeast = prom.InOverflow(0.99, delta)
				}
				if q := prom.Max(delta); !math.IsNaN(q) {
					ms := q * 1000
					sr.SchedMaxMS = &ms
				}
			}
			v := m.Sum("spookat_messages_saved_total") - savedBefore
			sr.SavedInWindow = &v
		}
	}
	if slackBefore >= 0 {
		if n, err := slackCount(ctx, r.http, r.cfg.SlackMock); err == nil {
			sr.Slack = &SlackReport{DeliveredInWindow: n - slackBefore, DeliveredRate: float64(n-slackBefore) / wall.Seconds()}
		}
	}
	return sr
}

// drainSlack waits, after a stair, until the mock has received one post per message acked so
// far (or cfg.Drain passes), and records how long that took.
func (r *runner) drainSlack(ctx context.Context, sr *StairReport, base int64) {
	if sr.Slack == nil {
		sr.Slack = &SlackReport{}
	}
	t0 := time.Now()
	deadline := t0.Add(r.cfg.Drain)
	// Acks of this stair still in flight first.
	for r.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want := r.acked.Load()
	for {
		n, err := slackCount(ctx, r.http, r.cfg.SlackMock)
		if err == nil {
			sr.Slack.DeliveredTotal = n - base
			if n-base >= want {
				sr.Slack.AllDelivered = true
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond) // the mock's /stats walks every post: do not poll hard
	}
	sr.Slack.DrainSeconds = time.Since(t0).Seconds()
	sr.Slack.Expected = want
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// loadAvg is the 1-minute load average, to tell a busy box in the report.
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func mb(b uint64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }

func randomID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// filler is message text that needs no JSON escaping.
func filler(n int) []byte {
	const s = "Hi! I have a question about my order, could someone help me please? "
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, s[:min(len(s), n-len(b))]...)
	}
	return b
}

// Machine describes where the run happened.
type Machine struct {
	NumCPU      int    `json:"num_cpu"`      // CPUs of the machine
	AllowedCPUs int    `json:"allowed_cpus"` // CPUs loadgen may run on (taskset)
	GOMAXPROCS  int    `json:"gomaxprocs"`
	CPUModel    string `json:"cpu_model,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go_version"`
}

func machine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), AllowedCPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n := 0
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "processor":
				n++
			case "model name":
				if m.CPUModel == "" {
					m.CPUModel = strings.TrimSpace(v)
				}
			}
		}
		if n > 0 {
			m.NumCPU = n
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}
