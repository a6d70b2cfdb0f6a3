package widget

import (
	"sync"
	"time"

	fws "github.com/fasthttp/websocket"
)

const (
	writeTimeout = 10 * time.Second
	outboxSize   = 64 // frames queued for one socket before it counts as too slow
)

// conn is one websocket with its own sender goroutine. Frames are queued, never written by
// the caller: the writer's goroutine must never wait on a visitor's network.
type conn struct {
	ws       *fws.Conn
	out      chan []byte
	gone     chan struct{} // closed when the socket is finished
	sendDone chan struct{} // closed when sendLoop has returned
	once     sync.Once

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
	c := &conn{ws: ws, out: make(chan []byte, outboxSize), gone: make(chan struct{}), sendDone: make(chan struct{})}
	go c.sendLoop()
	return c
}

func (c *conn) sendLoop() {
	defer close(c.sendDone)
	for {
		select {
		case <-c.gone:
			return
		case frame := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.ws.WriteMessage(fws.TextMessage, frame); err != nil {
				c.close()
				return
			}
		}
	}
}

// trySend queues a frame without waiting. A socket whose queue is full is too slow to keep
// and is closed: the client resumes from its last message id when it reconnects.
func (c *conn) trySend(frame []byte) {
	select {
	case c.out <- frame:
	case <-c.gone:
	default:
		c.close()
	}
}

// send queues a frame, waiting for room (only the socket's own reader goroutine calls it).
func (c *conn) send(frame []byte) bool {
	select {
	case c.out <- frame:
		return true
	case <-c.gone:
		return false
	}
}

// close ends the socket: the reader's pending read fails and the handler returns.
func (c *conn) close() {
	c.once.Do(func() { close(c.gone) })
	c.life.Lock()
	if !c.finished {
		_ = c.ws.NetConn().Close()
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
	<-c.sendDone
	c.life.Lock()
	c.finished = true
	c.life.Unlock()
}

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
