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
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(uintptr) bool
	wmu     sync.Mutex
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
	err := c.raw.Read(c.readFn)
	n := c.rn
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case c.rerr != 0:
		return 0, c.opError("read", os.NewSyscallError("read", c.rerr))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werr = p, 0, 0
	err := c.raw.Write(c.writeFn)
	n := c.wn
	c.wbuf = nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case c.werr != 0:
		return n, c.opError("write", os.NewSyscallError("write", c.werr))
	}
	return n, nil
}

// opError is the error net.TCPConn would return: net.ErrClosed, os.ErrDeadlineExceeded and
// the errno stay findable with errors.Is, and a timeout says so through net.Error.
func (c *conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok { // RawConn's own, named raw-read or raw-write
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
