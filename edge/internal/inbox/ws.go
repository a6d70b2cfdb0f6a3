package inbox

import (
	"context"
	"sync"
	"time"

	fws "github.com/fasthttp/websocket"
	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/sockets"
	"spookat/edge/internal/store"
)

// opConn is one operator websocket. Events are queued and written by its own goroutine; a
// socket too slow to keep up is closed, and the inbox reconnects and reloads.
//
// The queue is one buffer: the hub encodes each event straight into it, already as the
// next element of a JSON array, and the writer swaps it for its spare and writes it: no
// allocation, channel send or copy an event, where a channel of frames had all three
// (bench/path.md), and one wake-up a batch.
type opConn struct {
	ws *websocket.Conn

	mu sync.Mutex
	// queued is "[" and the events waiting, separated by commas: with a "]" it is a batch's
	// frame. ends[i] is where event i ends in it (the next starts a comma later).
	queued []byte
	ends   []int
	// ready: the first event of a batch was queued. filling: outboxEvents/4 wait; a batched
	// socket's writer takes them before its window ends, before the queue fills and the
	// socket counts as too slow.
	ready      chan struct{}
	filling    chan struct{}
	gone       chan struct{}
	once       sync.Once
	operatorID int64
	session    []byte // session token hash; nil for an API token
	token      []byte // API token hash; nil for a session
	// code and reason are the close frame's, set once before gone is closed.
	code   int
	reason string
}

func newOpConn(ws *websocket.Conn, operatorID int64) *opConn {
	return &opConn{ws: ws, ready: make(chan struct{}, 1), filling: make(chan struct{}, 1), gone: make(chan struct{}), operatorID: operatorID}
}

// outboxEvents is how many events wait for one operator socket before it counts as too slow.
const outboxEvents = 256

// push queues an event.
func (c *opConn) push(b []byte) { c.queue(func(dst []byte) []byte { return append(dst, b...) }) }

// queue queues the event encode appends to its argument.
func (c *opConn) queue(encode func(dst []byte) []byte) {
	c.mu.Lock()
	n := len(c.ends)
	if n == outboxEvents {
		c.mu.Unlock()
		c.close() // its queue is full: too slow to keep (a socket already gone stays as it was: once)
		return
	}
	if n == 0 {
		c.queued = append(c.queued[:0], '[')
	} else {
		c.queued = append(c.queued, ',')
	}
	c.queued = encode(c.queued)
	c.ends = append(c.ends, len(c.queued))
	c.mu.Unlock()
	switch {
	case n == 0:
		signal(c.ready)
	case n+1 >= outboxEvents/4:
		signal(c.filling)
	}
}

// signal sends on a channel of one without waiting: one waiting signal says it all.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// take swaps the queue for buf and ends (emptied), and returns it.
func (c *opConn) take(buf []byte, ends []int) ([]byte, []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf, c.queued = c.queued, buf[:0]
	ends, c.ends = c.ends, ends[:0]
	return buf, ends
}

func (c *opConn) close() { c.closeWith(fws.CloseGoingAway, "") }

func (c *opConn) closeWith(code int, reason string) {
	c.once.Do(func() {
		c.code, c.reason = code, reason
		close(c.gone)
	})
}

// A batched socket gathers the events that follow a first one for a window. A quiet inbox
// (an operator answering one chat) gets 25 ms, below what a person notices; an inbox that
// receives more than busyRate events a second (a team watching many busy sites) doubles its
// window up to busyWindow, because each window costs a socket write and nobody reads a list
// that moves that fast in 25 ms steps. It halves back once the rate falls under half of that.
const (
	batchWindow = 25 * time.Millisecond
	busyWindow  = 100 * time.Millisecond
	busyRate    = 40 // events a second
)

// nextWindow is the window after a batch of n events gathered in span: the rate is of the
// events that followed the first, the one that opened the window.
func nextWindow(span time.Duration, n int) time.Duration {
	switch rate := float64(n-1) / span.Seconds(); {
	case rate >= busyRate:
		return min(2*span, busyWindow)
	case rate < busyRate/2:
		return max(span/2, batchWindow)
	}
	return span
}

// opWriter is a socket's writer between batches.
type opWriter struct {
	c      *opConn
	batch  bool // events go out as JSON arrays, a window's at a time
	buf    []byte
	ends   []int
	window *time.Timer
	span   time.Duration
	last   time.Time // the last batch's end
}

func newOpWriter(c *opConn, batch bool) *opWriter {
	return &opWriter{c: c, batch: batch, span: batchWindow}
}

// gather takes the events queued, once ready said the first was: a batched socket's after
// its window (or sooner, when the queue fills or the socket goes). It says how many.
func (w *opWriter) gather() int {
	if w.batch {
		if time.Since(w.last) > busyWindow { // quiet since the last batch
			w.span = batchWindow
		}
		if w.window == nil {
			w.window = time.NewTimer(w.span)
		} else {
			w.window.Reset(w.span)
		}
		select {
		case <-w.window.C:
		case <-w.c.filling:
		case <-w.c.gone:
		}
		w.window.Stop()
	}
	w.buf, w.ends = w.c.take(w.buf, w.ends)
	n := len(w.ends)
	if w.batch && n > 0 {
		w.span, w.last = nextWindow(w.span, n), time.Now()
	}
	return n
}

// frames calls write with what gather took: one JSON array, or each event on its own.
func (w *opWriter) frames(write func(frame []byte) error) error {
	if w.batch {
		w.buf = append(w.buf, ']')
		return write(w.buf)
	}
	from := 1
	for _, end := range w.ends {
		if err := write(w.buf[from:end]); err != nil {
			return err
		}
		from = end + 1
	}
	return nil
}

// wsUpgrade refuses a plain request and a cross-site upgrade (the cookie would ride along).
func (h *Handler) wsUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return fail(c, fiber.StatusUpgradeRequired, "upgrade_required", "This endpoint speaks websocket only.")
	}
	if !sameOrigin(c) {
		return fail(c, fiber.StatusForbidden, "origin_not_allowed", "The inbox websocket opens from the inbox's own page only.")
	}
	return c.Next()
}

func (h *Handler) ws() fiber.Handler {
	return websocket.New(func(ws *websocket.Conn) {
		defer sockets.CloseNow(ws.NetConn()) // fasthttp keeps hijacked connections open
		w := ws.Locals("who").(*who)
		c := newOpConn(ws, w.op.ID)
		c.session, c.token = w.session, w.token
		h.Hub.track(c)
		defer h.Hub.untrack(c)
		// Read again once tracked: a logout or a membership removed between the upgrade's
		// auth and track would otherwise go unnoticed by this socket.
		ctx, cancel := contextTimeout(5 * time.Second)
		live, err := h.stillValid(ctx, w)
		var list []store.SiteRef
		if err == nil && live {
			list, err = h.Store.OperatorSites(ctx, w.op.ID)
		}
		cancel()
		if err != nil {
			return
		}
		if !live {
			_ = ws.WriteControl(fws.CloseMessage, fws.FormatCloseMessage(CloseSessionEnded, "session_ended"), time.Now().Add(time.Second))
			return
		}
		ids := make([]int64, len(list))
		for i, s := range list {
			ids[i] = s.ID
		}
		h.Hub.subscribe(c, ids)
		defer h.Hub.unsubscribe(c, ids)
		readDone := make(chan struct{})
		go func() { // reads only to notice the close (and answer pings)
			defer close(readDone)
			ws.SetReadLimit(4096)
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					c.close()
					return
				}
			}
		}()
		// ?batch=1 (the inbox page asks for it): events that come within a window of each
		// other go out as one frame, a JSON array, so a busy inbox costs the edge one socket
		// write per window instead of one per message.
		out := newOpWriter(c, ws.Query("batch") == "1")
		ping := time.NewTicker(30 * time.Second)
		defer ping.Stop()
		_ = ws.WriteMessage(fws.TextMessage, []byte(`{"type":"ready"}`))
		for {
			select {
			case <-c.gone:
				_ = ws.WriteControl(fws.CloseMessage, fws.FormatCloseMessage(c.code, c.reason), time.Now().Add(time.Second))
				_ = sockets.CloseNow(ws.NetConn())
				<-readDone
				return
			case <-c.ready:
				if out.gather() == 0 {
					continue
				}
				_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := out.frames(func(b []byte) error { return ws.WriteMessage(fws.TextMessage, b) }); err != nil {
					c.close()
				}
			case <-ping.C:
				if err := ws.WriteControl(fws.PingMessage, nil, time.Now().Add(5*time.Second)); err != nil {
					c.close()
				}
			}
		}
	}, websocket.Config{HandshakeTimeout: 10 * time.Second})
}

// stillValid reports whether the session or API token a socket was opened with still exists.
func (h *Handler) stillValid(ctx context.Context, w *who) (bool, error) {
	if w.session != nil {
		_, _, found, err := h.Store.SessionOperator(ctx, w.session, time.Now().UnixMilli())
		return found, err
	}
	_, found, err := h.Store.TokenOperator(ctx, w.token)
	return found, err
}
