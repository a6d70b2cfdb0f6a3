package widget

import (
	"os"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// poller reads every widget socket on one goroutine. A socket with a goroutine parked in its
// read costs that goroutine's stack, a wake-up a message, and a second read(2) that finds
// nothing (Go reads until EAGAIN before it parks); here one epoll set holds the sockets, and
// the poller reads each once when epoll says it has bytes. The epoll set's own descriptor
// waits in Go's netpoller, so the poller parks like any goroutine and never holds the
// scheduler in epoll_wait.
//
// The frames that never wait (quick) are answered on the poller's goroutine; at the first
// other one the socket leaves the set and a goroutine of its own handles that frame and what
// followed it, then gives the socket back.
type poller struct {
	epfd   int
	file   *os.File // the epoll set as Go's netpoller sees it (its finalizer would close it)
	raw    syscall.RawConn
	events []unix.EpollEvent
	buf    []byte // what one read(2) returned

	mu    sync.Mutex
	socks map[uint64]*session
	next  uint64

	// One read(2) on the socket being read, made once rather than a closure per read; its
	// input and results live here, on the poller's goroutine only.
	readFn func(fd uintptr)
	rn     int
	rerr   error
	full   bool // a read filled buf: the socket may have more
	waitFn func(fd uintptr) bool
}

const pollBuf = 64 << 10

var (
	readers     *poller
	readersOnce sync.Once
)

// thePoller is the poller every widget socket shares, started with the first; nil where
// epoll cannot be had (the sockets then keep a reading goroutine each).
func thePoller() *poller {
	readersOnce.Do(func() {
		p, err := newPoller()
		if err == nil {
			readers = p
			go p.run()
		}
	})
	return readers
}

func newPoller() (*poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	file := os.NewFile(uintptr(fd), "widget-epoll")
	raw, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, err
	}
	p := &poller{epfd: fd, file: file, raw: raw, events: make([]unix.EpollEvent, 128), buf: make([]byte, pollBuf), socks: map[uint64]*session{}}
	p.readFn = func(fd uintptr) {
		for {
			p.rn, p.rerr = rawRead(int(fd), p.buf)
			if p.rerr != syscall.EINTR {
				return
			}
		}
	}
	p.waitFn = p.wait
	return p, nil
}

func (p *poller) run() {
	for {
		if err := p.raw.Read(p.waitFn); err != nil {
			return
		}
	}
}

// wait takes what epoll has ready without waiting, and handles it. Returning false parks the
// goroutine in Go's netpoller until the epoll set is readable again; it does so right after
// handling what it took, without asking epoll once more, when nothing can be left behind:
// every socket read returned less than the buffer (the set is edge-triggered in Go's
// netpoller, so bytes arriving from here on make it readable again), and epoll had fewer
// sockets ready than it could give. Else it returns true and run asks again.
func (p *poller) wait(uintptr) bool {
	n, err := rawEpollNow(p.epfd, p.events)
	if err == unix.EINTR {
		return true // ask again: what is ready would not wake the set a second time
	}
	if err != nil || n <= 0 {
		return false
	}
	p.full = false
	for _, ev := range p.events[:n] {
		id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
		p.mu.Lock()
		s := p.socks[id]
		p.mu.Unlock()
		if s != nil {
			p.readable(s)
		}
	}
	if n > 1 {
		// Many sockets at once: the writer, which acks them, gets its turn before the next
		// batch (one goroutine reading them all would otherwise run its whole time slice).
		runtime.Gosched()
	}
	return p.full || n == len(p.events)
}

// add puts s's socket in the set (unless its session has left already).
func (p *poller) add(s *session) bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.removed {
		return false
	}
	p.mu.Lock()
	p.next++
	s.pollID = p.next
	p.socks[s.pollID] = s
	p.mu.Unlock()
	if !p.ctl(s, unix.EPOLL_CTL_ADD) {
		p.mu.Lock()
		delete(p.socks, s.pollID)
		p.mu.Unlock()
		return false
	}
	return true
}

// ctl adds s's socket to the set or takes it out. A socket already closed is in no set.
func (p *poller) ctl(s *session, op int) bool {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(uint32(s.pollID)), Pad: int32(uint32(s.pollID >> 32))}
	var err error
	cerr := s.c.raw.Control(func(fd uintptr) { err = unix.EpollCtl(p.epfd, op, int(fd), &ev) })
	return cerr == nil && err == nil
}

// remove forgets s: after it the poller neither reads the socket nor handles its frames.
func (p *poller) remove(s *session) {
	s.rmu.Lock()
	if !s.removed {
		s.removed = true
		p.mu.Lock()
		delete(p.socks, s.pollID)
		p.mu.Unlock()
		if s.polled {
			p.ctl(s, unix.EPOLL_CTL_DEL)
		}
	}
	s.rmu.Unlock()
}

// readable reads s's socket once and handles the frames it completed.
func (p *poller) readable(s *session) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.removed || !s.polled {
		return
	}
	defer p.recover(s)
	if err := s.c.raw.Control(p.readFn); err != nil {
		p.drop(s)
		return
	}
	n, err := p.rn, p.rerr
	p.rn, p.rerr = 0, nil
	p.full = p.full || n == len(p.buf)
	switch {
	case err == syscall.EAGAIN:
		return
	case err != nil || n == 0: // reset, or the client's FIN
		p.drop(s)
		return
	}
	data := p.buf[:n]
	if len(s.pending) > 0 {
		s.pending = append(s.pending, data...)
		data = s.pending
	}
	rest, st := s.frames(data, true)
	switch st {
	case keepReading:
		s.keep(rest)
	case handOff:
		// The socket leaves the set while its goroutine has it: what arrives meanwhile
		// waits in the kernel, in order.
		p.pause(s)
		rest = append([]byte(nil), rest...)
		go p.handOff(s, rest)
	case stopReading:
		p.drop(s)
	}
}

// recover ends, with a log line, a socket whose frame made its handler panic, as the
// upgrade's handler does for a socket read by a goroutine of its own; the others go on.
func (p *poller) recover(s *session) {
	if r := recover(); r != nil {
		s.h.Log.Error("widget socket failed", "site", s.site.ID, "panic", r)
		p.drop(s)
	}
}

// pause takes s's socket out of the set (rmu held).
func (p *poller) pause(s *session) {
	p.ctl(s, unix.EPOLL_CTL_DEL)
	s.polled = false
}

// drop takes s's socket out of the set for good and has its session end (rmu held).
func (p *poller) drop(s *session) {
	p.pause(s)
	s.end()
}

// handOff handles, on a goroutine of the socket's own, the frame in s.buf that may wait and
// the bytes that followed it, then gives the socket back to the poller.
func (p *poller) handOff(s *session, rest []byte) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.removed {
		return
	}
	defer p.recover(s)
	if !s.handle(s.buf) {
		s.end()
		return
	}
	rest, st := s.frames(rest, false)
	if st == stopReading {
		s.end()
		return
	}
	s.keep(rest)
	s.polled = true
	if !p.ctl(s, unix.EPOLL_CTL_ADD) {
		s.polled = false
		s.end()
	}
}
