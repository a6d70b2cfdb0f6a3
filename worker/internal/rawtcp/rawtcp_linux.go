package rawtcp

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// conn is a *net.TCPConn whose Read and Write are raw system calls. Deadlines, Close and the
// rest are the TCPConn's: waiting goes through its RawConn, which honours them.
type conn struct {
	*net.TCPConn
	raw syscall.RawConn

	// Each direction's state, so that the callbacks are made once rather than a closure a
	// call; its lock, because net.Conn lets goroutines call Read (or Write) at once.
	rmu     sync.Mutex
	rbuf    []byte
	rn      int
	rerr    syscall.Errno
	readFn  func(uintptr) bool
	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(uintptr) bool
}

// Wrap returns c with raw reads and writes when it is a TCP connection, else c.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rc := &conn{TCPConn: tc, raw: raw}
	rc.readFn = rc.readOnce
	rc.writeFn = rc.writeSome
	return rc
}

func (c *conn) readOnce(fd uintptr) bool {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.rbuf))), uintptr(len(c.rbuf)))
	if e == syscall.EINTR {
		return c.readOnce(fd)
	}
	if e != 0 {
		n = 0
	}
	c.rn, c.rerr = int(n), e
	return e != syscall.EAGAIN
}

// writeSome writes until the buffer is out or the socket is full (then it waits for room).
func (c *conn) writeSome(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		rest := c.wbuf[c.wn:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(rest))), uintptr(len(rest)))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerr = p, 0, 0
	n, err := c.outcome("read", c.raw.Read(c.readFn), c.rn, c.rerr)
	c.rbuf = nil
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werr = p, 0, 0
	n, err := c.outcome("write", c.raw.Write(c.writeFn), c.wn, c.werr)
	c.wbuf = nil
	return n, err
}

// outcome is what Read or Write answers after its RawConn call: the bytes moved and the
// error net.TCPConn would return (net.ErrClosed, os.ErrDeadlineExceeded and the errno stay
// findable with errors.Is, and a timeout says so through net.Error).
func (c *conn) outcome(op string, err error, n int, errno syscall.Errno) (int, error) {
	if oe, ok := err.(*net.OpError); ok { // RawConn's own, named raw-read or raw-write
		err = oe.Err
	}
	if err == nil && errno != 0 {
		err = os.NewSyscallError(op, errno)
	}
	if err != nil {
		return n, &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return n, nil
}
