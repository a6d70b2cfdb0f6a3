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
type opConn struct {
	ws  *websocket.Conn
	out chan []byte // events queued for the socket (outboxEvents)
	// filling: out is a quarter full. A batched socket's writer gathers a window's events
	// from out once the window ends, not one wake-up per event, and this tells it to take
	// them sooner, before out fills and the socket counts as too slow.
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
	return &opConn{ws: ws, out: make(chan []byte, outboxEvents), filling: make(chan struct{}, 1), gone: make(chan struct{}), operatorID: operatorID}
}

// outboxEvents is how many events wait for one operator socket before it counts as too slow.
const outboxEvents = 256

func (c *opConn) push(b []byte) {
	select { // one case and a default: a plain non-blocking send, cheaper than a select
	case c.out <- b:
		if len(c.out) >= outboxEvents/4 {
			select {
			case c.filling <- struct{}{}:
			default:
			}
		}
		return
	default:
	}
	c.close() // its queue is full: too slow to keep (a socket already gone stays as it was: once)
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
	batchWindow    = 25 * time.Millisecond
	busyWindow     = 100 * time.Millisecond
	busyRate       = 40 // events a second
	batchMaxEvents = 256
	batchMaxBytes  = 256 << 10
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

// collect makes a JSON array of first and the events that follow it within span (at most
// batchMaxEvents or batchMaxBytes), in buf, and says how many events it holds.
func (c *opConn) collect(buf, first []byte, window *time.Timer, span time.Duration) ([]byte, *time.Timer, int) {
	buf = append(append(buf[:0], '['), first...)
	if window == nil {
		window = time.NewTimer(span)
	} else {
		window.Reset(span)
	}
	defer window.Stop()
	n := 1
	for {
		select {
		case <-window.C:
			buf, n = c.take(buf, n)
			return append(buf, ']'), window, n
		case <-c.gone:
			return append(buf, ']'), window, n
		case <-c.filling:
			if buf, n = c.take(buf, n); n >= batchMaxEvents || len(buf) >= batchMaxBytes {
				return append(buf, ']'), window, n
			}
		}
	}
}

// take appends to a batch the events waiting, up to the batch's limits.
func (c *opConn) take(buf []byte, n int) ([]byte, int) {
	for n < batchMaxEvents && len(buf) < batchMaxBytes {
		select {
		case b := <-c.out:
			buf = append(append(buf, ','), b...)
			n++
		default:
			return buf, n
		}
	}
	return buf, n
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
		batch := ws.Query("batch") == "1"
		var buf []byte
		var window *time.Timer
		span, last := batchWindow, time.Time{}
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
			case b := <-c.out:
				if batch {
					if time.Since(last) > busyWindow { // quiet since the last frame
						span = batchWindow
					}
					var n int
					buf, window, n = c.collect(buf, b, window, span)
					span, last = nextWindow(span, n), time.Now()
					b = buf
				}
				_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := ws.WriteMessage(fws.TextMessage, b); err != nil {
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
