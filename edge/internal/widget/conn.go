package widget

import (
	"sync"
	"time"

	fws "github.com/fasthttp/websocket"

	"spookat/edge/internal/sockets"
)

const (
	writeTimeout = 10 * time.Second
	outboxSize   = 64 // frames queued for one socket before it counts as too slow
)

// conn is one websocket. Frames are queued, never written by the caller: the writer's
// goroutine must never wait on a visitor's network. A sender goroutine runs only while there
// is something to write and ends when the queue is empty, so an idle socket holds no
// goroutine but its reader (and no queue).
type conn struct {
	ws   *fws.Conn
	gone chan struct{} // closed when the socket is finished
	once sync.Once

	qmu     sync.Mutex
	queue   [][]byte      // frames waiting for the sender
	sending bool          // a sender goroutine is writing the queue
	stopped bool          // finish has begun: no new sender starts
	room    chan struct{} // a full queue has room again
	senders sync.WaitGroup

	// fasthttp recycles the hijacked connection as soon as the handler returns: after
	// finish, nothing may touch ws. life guards that.
	life     sync.Mutex
	finished bool

	mu       sync.Mutex
	resuming bool
	held     []heldFrame // live frames that arrived during a resume
	lastSent int64       // highest message id sent as a message frame
}

type heldFrame struct {
	id    int64
	frame []byte
}

func newConn(ws *fws.Conn) *conn {
	return &conn{ws: ws, gone: make(chan struct{}), room: make(chan struct{}, 1)}
}

func (c *conn) isGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

// enqueue adds a frame to the queue, starting a sender when none runs. It reports whether
// the frame was queued, and when not whether the queue was full (else the socket is gone).
func (c *conn) enqueue(frame []byte) (queued, full bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.stopped || c.isGone() {
		return false, false
	}
	if len(c.queue) >= outboxSize {
		return false, true
	}
	c.queue = append(c.queue, frame)
	if !c.sending {
		c.sending = true
		c.senders.Add(1)
		go c.sendQueued()
	}
	return true, false
}

// sendQueued writes the queue in order until it is empty or the socket is gone.
func (c *conn) sendQueued() {
	defer c.senders.Done()
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 || c.isGone() {
			c.queue = nil // an idle socket keeps no queue
			c.sending = false
			c.qmu.Unlock()
			return
		}
		frame := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		wasFull := len(c.queue) == outboxSize-1
		c.qmu.Unlock()
		if wasFull {
			select {
			case c.room <- struct{}{}:
			default:
			}
		}
		_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := c.ws.WriteMessage(fws.TextMessage, frame); err != nil {
			c.close()
		}
	}
}

// trySend queues a frame without waiting. A socket whose queue is full is too slow to keep
// and is closed (1013, try again later): the client reconnects and resumes from its last
// message id. The close frame is written on a goroutine of its own: trySend runs on the
// writer's goroutine, and a reader that stopped reading may hold the write for a second.
func (c *conn) trySend(frame []byte) {
	if _, full := c.enqueue(frame); full {
		go c.closeWith(fws.CloseTryAgainLater, "too slow: reconnect and resume")
	}
}

// send queues a frame, waiting for room (only the socket's own reader goroutine calls it).
func (c *conn) send(frame []byte) bool {
	for {
		queued, full := c.enqueue(frame)
		if queued {
			return true
		}
		if !full {
			return false
		}
		select {
		case <-c.room:
		case <-c.gone:
			return false
		}
	}
}

// close ends the socket: the reader's pending read fails and the handler returns.
func (c *conn) close() {
	c.once.Do(func() { close(c.gone) })
	c.life.Lock()
	if !c.finished {
		_ = sockets.CloseNow(c.ws.NetConn())
	}
	c.life.Unlock()
}

// closeWith sends a close frame with a code, then closes.
func (c *conn) closeWith(code int, reason string) {
	c.life.Lock()
	if !c.finished {
		_ = c.ws.WriteControl(fws.CloseMessage, fws.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	}
	c.life.Unlock()
	c.close()
}

// finish is the handler's last act: after it, the socket is never touched again.
func (c *conn) finish() {
	c.once.Do(func() { close(c.gone) })
	c.qmu.Lock()
	c.stopped = true
	c.qmu.Unlock()
	c.senders.Wait()
	c.life.Lock()
	c.finished = true
	c.life.Unlock()
}

// Signal queues an ephemeral frame; with the queue full it is dropped (a message frame
// would close the socket instead: those must not be lost).
func (c *conn) Signal(frame []byte) { c.enqueue(frame) }

// Deliver is a live message frame from the hub (writer's goroutine: must not block).
func (c *conn) Deliver(id int64, frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resuming {
		c.held = append(c.held, heldFrame{id, frame})
		return
	}
	if id <= c.lastSent {
		return
	}
	c.lastSent = id
	c.trySend(frame)
}
