package widget

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	fws "github.com/fasthttp/websocket"

	"spookat/edge/internal/sockets"
)

const (
	writeTimeout = 10 * time.Second
	outboxSize   = 64 // frames queued for one socket before it counts as too slow
)

// conn is one websocket. Frames are queued, never written by the caller with a wait: the
// writer's goroutine must never wait on a visitor's network. The queue holds frames as they
// go on the wire, framed here rather than by the websocket library, so that a write the
// kernel took only part of continues where it stopped. One flusher for every socket writes
// what the kernel takes at once (a commit's acks cost one goroutine's wake, not a goroutine
// each); a socket whose buffer is full gets a sender goroutine of its own for the rest, which
// ends when its queue is empty, so an idle socket holds no goroutine but its reader (and no
// queue). Every frame goes through the queue, pongs and close frames too, so none can cut
// into another; the library writes by itself only the close of a protocol error it reads,
// on a socket about to go.
type conn struct {
	nc  net.Conn        // the websocket's connection: the sender's writes, which may wait
	raw syscall.RawConn // the socket itself: the flusher's writes, which never wait (nil: none)
	// One write(2) on the socket, made once per socket rather than a closure per frame; its
	// input and results live here, under qmu.
	writeFn func(fd uintptr)
	wbuf    []byte
	wn      int
	werr    error
	gone    chan struct{} // closed when the socket is finished
	once    sync.Once
	onClose func() // called once the socket is closed (set before anyone else has the conn)

	qmu     sync.Mutex
	queue   [][]byte      // frames waiting, on the wire's terms
	partial bool          // queue[0] is the rest of a frame partly written
	sending bool          // the flusher or a sender has the queue
	closing bool          // a close frame is queued: nothing more after it
	stopped bool          // finish has begun: no new sender starts
	room    chan struct{} // a full queue has room again
	senders sync.WaitGroup

	// fasthttp recycles the hijacked connection as soon as the handler returns: after
	// finish, nothing may touch nc. life guards that.
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
	c := newNetConn(ws.NetConn())
	// The library would answer on its own, cutting into a frame under way.
	ws.SetPingHandler(func(data string) error {
		c.enqueue(opPong, []byte(data))
		return nil
	})
	ws.SetCloseHandler(func(code int, _ string) error {
		var msg []byte
		if code != fws.CloseNoStatusReceived {
			msg = fws.FormatCloseMessage(code, "")
		}
		c.queueClose(msg)
		return nil
	})
	return c
}

// newNetConn is the writing side of the socket nc: its raw descriptor too when it has one.
func newNetConn(nc net.Conn) *conn {
	c := &conn{nc: nc, gone: make(chan struct{}), room: make(chan struct{}, 1)}
	sc, ok := sockets.Underlying(nc).(syscall.Conn)
	if !ok {
		return c
	}
	if raw, err := sc.SyscallConn(); err == nil {
		c.raw = raw
		c.writeFn = func(fd uintptr) {
			for {
				c.wn, c.werr = rawWrite(int(fd), c.wbuf)
				if c.werr != syscall.EINTR {
					return
				}
			}
		}
	}
	return c
}

func (c *conn) isGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

// enqueue adds a frame to the queue and has it written. It reports whether the frame was
// queued, and when not whether the queue was full (else the socket is gone or closing).
func (c *conn) enqueue(op byte, payload []byte) (queued, full bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.stopped || c.closing || c.isGone() {
		return false, false
	}
	if len(c.queue) >= outboxSize {
		return false, true
	}
	c.queue = append(c.queue, newFrame(op, payload))
	c.startLocked()
	return true, false
}

// startLocked has the queue written unless a writer has it already (qmu held).
func (c *conn) startLocked() {
	if c.sending {
		return
	}
	c.sending = true
	c.senders.Add(1)
	if c.raw != nil {
		flush.add(c)
	} else {
		go c.sendQueued()
	}
}

// popLocked drops the frame written (qmu held).
func (c *conn) popLocked() {
	c.queue[0] = nil
	c.queue = c.queue[1:]
	c.partial = false
	if len(c.queue) == outboxSize-1 {
		select {
		case c.room <- struct{}{}:
		default:
		}
	}
}

// doneLocked ends the writer's turn (qmu held); a queue that ended with a close frame closes
// the socket.
func (c *conn) doneLocked() (closeNow bool) {
	c.queue = nil // an idle socket keeps no queue
	c.partial = false
	c.sending = false
	return c.closing
}

// flushNow writes the queue while the kernel takes it without waiting, on the flusher's
// goroutine; the rest goes to a sender goroutine of the socket's own.
func (c *conn) flushNow() {
	c.qmu.Lock()
	for len(c.queue) > 0 && !c.isGone() {
		frame := c.queue[0]
		n, err := c.writeNow(frame)
		if n == len(frame) {
			c.popLocked()
			continue
		}
		if err != nil && !errors.Is(err, syscall.EAGAIN) {
			c.doneLocked()
			c.qmu.Unlock()
			c.close()
			c.senders.Done()
			return
		}
		c.queue[0] = frame[n:]
		c.partial = c.partial || n > 0
		c.qmu.Unlock()
		go c.sendQueued() // the writer's turn, and its count in senders, go with it
		return
	}
	closeNow := c.doneLocked()
	c.qmu.Unlock()
	if closeNow {
		c.close()
	}
	c.senders.Done()
}

// writeNow is one write(2) on the non-blocking socket: what the kernel takes now (qmu
// held). It does not take the connection's write lock (no write of the library's can be
// waiting on it but a protocol error's close, on a socket about to go).
func (c *conn) writeNow(b []byte) (n int, err error) {
	c.wbuf = b
	cerr := c.raw.Control(c.writeFn)
	n, err = max(c.wn, 0), c.werr
	c.wbuf, c.wn, c.werr = nil, 0, nil
	if cerr != nil {
		return 0, cerr
	}
	return n, err
}

// sendQueued writes the queue in order, waiting for the socket, until it is empty or the
// socket is gone.
func (c *conn) sendQueued() {
	defer c.senders.Done()
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 || c.isGone() {
			closeNow := c.doneLocked()
			c.qmu.Unlock()
			if closeNow {
				c.close()
			}
			return
		}
		frame := c.queue[0]
		c.popLocked()
		c.qmu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := c.nc.Write(frame); err != nil {
			c.close()
		}
	}
}

// trySend queues a frame without waiting. A socket whose queue is full is too slow to keep
// and is closed (1013, try again later): the client reconnects and resumes from its last
// message id.
func (c *conn) trySend(frame []byte) {
	if _, full := c.enqueue(opText, frame); full {
		c.closeWith(fws.CloseTryAgainLater, "too slow: reconnect and resume")
	}
}

// send queues a frame, waiting for room (only the socket's own reader goroutine calls it).
func (c *conn) send(frame []byte) bool {
	for {
		queued, full := c.enqueue(opText, frame)
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

// close ends the socket: the reader's pending read fails and the handler returns (a socket
// the poller reads: its session leaves, onClose).
func (c *conn) close() {
	c.once.Do(func() { close(c.gone) })
	c.life.Lock()
	if !c.finished {
		_ = sockets.CloseNow(c.nc)
	}
	c.life.Unlock()
	if c.onClose != nil {
		c.onClose()
	}
}

// closeWith sends a close frame with a code, then closes: the frame goes out right after one
// the socket is in the middle of, if any (frames still queued are dropped: the socket is
// going, and a close frame behind them would race the connection's reset), and a socket that
// has not taken it within a second is closed without it.
func (c *conn) closeWith(code int, reason string) {
	c.queueClose(fws.FormatCloseMessage(code, reason))
}

// queueClose queues a close frame in place of the queue; the socket closes once it is
// written, or after a second.
func (c *conn) queueClose(msg []byte) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.stopped || c.closing || c.isGone() {
		return
	}
	c.closing = true
	keep := 0
	if c.partial {
		keep = 1
	}
	clear(c.queue[keep:])
	c.queue = append(c.queue[:keep], newFrame(opClose, msg))
	c.startLocked()
	time.AfterFunc(time.Second, c.close)
}

// finish is the handler's last act: after it, the socket is never touched again. A close
// frame queued is written first (or the socket closed within its second).
func (c *conn) finish() {
	c.qmu.Lock()
	c.stopped = true
	closing := c.closing
	c.qmu.Unlock()
	if !closing {
		c.once.Do(func() { close(c.gone) })
	}
	c.senders.Wait()
	c.once.Do(func() { close(c.gone) })
	c.life.Lock()
	c.finished = true
	c.life.Unlock()
}

// Signal queues an ephemeral frame; with the queue full it is dropped (a message frame
// would close the socket instead: those must not be lost).
func (c *conn) Signal(frame []byte) { c.enqueue(opText, frame) }

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
