// Package sockets makes the edge's open connections a budget: a listener that refuses
// connections past a cap with an HTTP 503 and a JSON reason, and that backs off and retries
// when accept itself fails (out of file descriptors), instead of stopping the server.
package sockets

import (
	"cmp"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Reserve is what the edge keeps for itself below the file limit: the SQLite files,
// JetStream's block files, NATS connections, the admin and metrics listeners, logs.
const Reserve = 512

// Budget is the default cap of open connections: the process's file limit less Reserve and
// less extra (what an in-process worker holds in outbound sockets). It never goes below a
// quarter of the limit, so a small limit still serves.
func Budget(extra int) (capacity int, limit uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	n := int(min(rl.Cur, 1<<30))
	return max(n-Reserve-extra, n/4), rl.Cur, nil
}

const refusalBody = `{"code":"busy","message":"this server holds as many connections as it may; retry in a few seconds"}`

// Refusal is what a client gets past the cap: a complete HTTP response, so a browser's
// websocket handshake and a plain request both read a status and a reason.
var Refusal = []byte("HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\n" +
	"Retry-After: 5\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(refusalBody)) + "\r\n\r\n" + refusalBody)

const crowdBody = `{"code":"rate_limited","message":"too many connections from this address are still opening; retry in a few seconds"}`

// Crowded is what a client gets when its address already holds PerAddr connections that have
// not yet had their first answer.
var Crowded = []byte("HTTP/1.1 429 Too Many Requests\r\n" +
	"Content-Type: application/json\r\n" +
	"Retry-After: 5\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(crowdBody)) + "\r\n\r\n" + crowdBody)

// refusing bounds the refusals being written at once: each holds a descriptor beyond the
// cap for up to a second, and past this many a refused client is just closed.
const refusing = 64

// Listener wraps a net.Listener with the budget.
type Listener struct {
	net.Listener
	// Max is the cap of open connections (0: no cap).
	Max int
	// Refused, if set, is called for each connection refused past Max.
	Refused func()
	// AcceptFailed, if set, is called for each failed accept that is retried.
	AcceptFailed func()
	Log          *slog.Logger
	// Sleep waits between retries of a failed accept (tests inject it; nil: time.Sleep).
	Sleep func(time.Duration)
	// Setup, when above 0, bounds the connections accepted and not yet answered: Accept
	// waits while Setup of them have had no response, no websocket upgrade and no close
	// (the server reports those with SetupDone), or for at most SetupHold each. A reconnect
	// storm then waits in the kernel's accept queue instead of making thousands of
	// goroutines runnable at once, ahead of every established socket's frames.
	Setup int
	// SetupHold is how long one connection may hold its setup slot (default 1 s): a client
	// that sends nothing does not keep others out.
	SetupHold time.Duration
	// FirstByte, when above 0, is how long a new connection may stay silent: its first byte
	// must come within it, or it is closed. (The HTTP server times a request only once its
	// first byte came: without this a connection that sends nothing is held for ever, and a
	// few hundred of them fill the budget.)
	FirstByte time.Duration
	// PerAddr, when above 0, caps the connections one client address holds before their first
	// answer (a response, an upgrade); past it a connection from that address gets Crowded.
	// Addresses that Shared says are shared by many clients (trusted proxies) are not capped.
	PerAddr int
	Shared  func(netip.Addr) bool

	open     atomic.Int64
	refusing atomic.Int64
	addrMu   sync.Mutex
	opening  map[netip.Addr]int // PerAddr's count by client address
	slots    chan struct{}      // setup slots, made on the first Accept
	slotOnce sync.Once
	lastLog  atomic.Int64 // unix nanos of the last "accept failing" log line
	closedMu sync.Mutex
	closed   bool
}

// Open is the number of connections accepted and not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Accept returns the next connection under the cap. Connections past it get Refusal and are
// closed here; accept errors other than a closed listener are retried with a back-off from
// 5 ms to 1 s, as net/http does.
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		held := l.takeSlot()
		c, err := l.Listener.Accept()
		if err != nil {
			l.giveSlot(held)
			if errors.Is(err, net.ErrClosed) || l.isClosed() {
				return nil, err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if l.AcceptFailed != nil {
				l.AcceptFailed()
			}
			l.logOnce("accept failing; retrying", "err", err, "open", l.open.Load(), "retry_in", delay)
			l.sleep(delay)
			continue
		}
		delay = 0
		if l.Max > 0 && l.open.Load() >= int64(l.Max) {
			l.giveSlot(held)
			l.refuse(c)
			continue
		}
		addr, counted := l.admitAddr(c)
		if !counted && addr.IsValid() {
			l.giveSlot(held)
			l.turnAway(c, Crowded)
			continue
		}
		l.open.Add(1)
		cc := &conn{Conn: c, l: l, addr: addr}
		cc.opening.Store(counted && l.PerAddr > 0)
		if l.FirstByte > 0 {
			_ = c.SetReadDeadline(time.Now().Add(l.FirstByte))
		}
		if held {
			// The timer before the flag: releaseSlot reads hold only after it took the flag.
			cc.hold = time.AfterFunc(cmp.Or(l.SetupHold, time.Second), cc.releaseSlot)
			cc.setup.Store(true)
		}
		return cc, nil
	}
}

// takeSlot waits for a setup slot; false when there are none to take (Setup 0).
func (l *Listener) takeSlot() bool {
	if l.Setup <= 0 {
		return false
	}
	l.slotOnce.Do(func() { l.slots = make(chan struct{}, l.Setup) })
	l.slots <- struct{}{}
	return true
}

func (l *Listener) giveSlot(held bool) {
	if held {
		<-l.slots
	}
}

// SetupDone says c has had its first answer (or is closed, or became a websocket): its
// setup slot goes to the next connection. Other connections are ignored; twice is once.
func SetupDone(c net.Conn) {
	if cc, ok := c.(*conn); ok {
		cc.setupDone()
	}
}

// Close stops accepting.
func (l *Listener) Close() error {
	l.closedMu.Lock()
	l.closed = true
	l.closedMu.Unlock()
	return l.Listener.Close()
}

func (l *Listener) isClosed() bool {
	l.closedMu.Lock()
	defer l.closedMu.Unlock()
	return l.closed
}

// admitAddr counts a new connection against its address's PerAddr. It returns the address
// and whether the connection may go on; an invalid address means no cap applies.
func (l *Listener) admitAddr(c net.Conn) (netip.Addr, bool) {
	if l.PerAddr <= 0 {
		return netip.Addr{}, true
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, true
	}
	addr := ap.Addr().Unmap()
	if l.Shared != nil && l.Shared(addr) {
		return netip.Addr{}, true
	}
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	if l.opening[addr] >= l.PerAddr {
		return addr, false
	}
	if l.opening == nil {
		l.opening = make(map[netip.Addr]int)
	}
	l.opening[addr]++
	return addr, true
}

func (l *Listener) leaveAddr(addr netip.Addr) {
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	if l.opening[addr] <= 1 {
		delete(l.opening, addr)
	} else {
		l.opening[addr]--
	}
}

func (l *Listener) refuse(c net.Conn) {
	l.logOnce("connection refused: the socket budget is full", "max", l.Max)
	l.turnAway(c, Refusal)
}

// turnAway answers c with a complete HTTP refusal and closes it.
func (l *Listener) turnAway(c net.Conn, answer []byte) {
	if l.Refused != nil {
		l.Refused()
	}
	if l.refusing.Add(1) > refusing {
		l.refusing.Add(-1)
		_ = c.Close()
		return
	}
	go func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		// Read the request first: closing with it unread would send a reset, and the
		// client could lose the answer.
		_ = c.SetDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		_, _ = c.Write(answer)
	}()
}

// logOnce logs at most one line a minute: a client hammering a full edge must not fill the log.
func (l *Listener) logOnce(msg string, args ...any) {
	if l.Log == nil {
		return
	}
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(time.Minute) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.Log.Warn(msg, args...)
}

func (l *Listener) sleep(d time.Duration) {
	if l.Sleep != nil {
		l.Sleep(d)
		return
	}
	time.Sleep(d)
}

type conn struct {
	net.Conn
	l       *Listener
	once    sync.Once
	setup   atomic.Bool // holds a setup slot
	hold    *time.Timer // gives the slot back after SetupHold
	addr    netip.Addr  // the client's, when PerAddr counts it
	opening atomic.Bool // counted in PerAddr until its first answer
}

// setupDone: the connection had its first answer (or closed): its slot and its place in its
// address's PerAddr go.
func (c *conn) setupDone() {
	c.releaseSlot()
	if c.opening.CompareAndSwap(true, false) {
		c.l.leaveAddr(c.addr)
	}
}

func (c *conn) releaseSlot() {
	if c.setup.CompareAndSwap(true, false) {
		c.hold.Stop()
		<-c.l.slots
	}
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	c.setupDone()
	return c.Conn.Close()
}

// SyscallConn is the socket's own, when it has one: the widget writes what the kernel takes
// at once through it, without a goroutine waiting (widget/conn.go).
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseNow closes a connection the HTTP server handed over to a handler (a websocket) at
// once. fasthttp's hijacked connection ignores Close until the handler returns, so a socket
// the edge gives up on (a reader too slow to keep) would stay open, its reader still reading.
func CloseNow(c net.Conn) error { return Underlying(c).Close() }

// Underlying is the connection under fasthttp's hijacked one (c itself for any other).
func Underlying(c net.Conn) net.Conn {
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		return u.UnsafeConn()
	}
	return c
}
