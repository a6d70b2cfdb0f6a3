package widget

import (
	"encoding/binary"
	"errors"
	"time"

	fws "github.com/fasthttp/websocket"

	"spookat/edge/internal/frames"
	"spookat/schema"
)

// The client's frames, read by the edge itself on Linux (poller_linux.go): what
// fasthttp/websocket's reader does for a socket that has a goroutine waiting on it, done on
// bytes a read returned, so that one goroutine reads every socket (RFC 6455 §5).

const (
	opContinuation = 0x0
	opBinary       = 0x2
	opPing         = 0x9
)

// clientFrame is one frame as the client sent it, its payload unmasked in place.
type clientFrame struct {
	fin     bool
	op      byte
	payload []byte
}

// errIncomplete: b does not hold the whole frame yet.
var errIncomplete = errors.New("incomplete frame")

// protocolError is a frame no client may send: the socket is closed with 1002 and the reason.
type protocolError string

func (e protocolError) Error() string { return string(e) }

// parseFrame reads the frame at the start of b and unmasks its payload in place; n is its
// length on the wire. A payload over limit is refused before it is read (errTooLarge).
func parseFrame(b []byte, limit int) (f clientFrame, n int, err error) {
	if len(b) < 2 {
		return f, 0, errIncomplete
	}
	b0, b1 := b[0], b[1]
	if b0&0x70 != 0 {
		return f, 0, protocolError("reserved bits set (no extension was agreed)")
	}
	f.fin, f.op = b0&0x80 != 0, b0&0x0F
	switch f.op {
	case opContinuation, opText, opBinary:
	case opClose, opPing, opPong:
		if !f.fin {
			return f, 0, protocolError("a fragmented control frame")
		}
	default:
		return f, 0, protocolError("an unknown opcode")
	}
	if b1&0x80 == 0 {
		return f, 0, protocolError("a client frame without a mask")
	}
	size, head := uint64(b1&0x7F), 2
	switch size {
	case 126:
		if len(b) < 4 {
			return f, 0, errIncomplete
		}
		size, head = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return f, 0, errIncomplete
		}
		size, head = binary.BigEndian.Uint64(b[2:]), 10
	}
	if f.op >= opClose && size > 125 {
		return f, 0, protocolError("a control frame over 125 bytes")
	}
	if f.op < opClose && size > uint64(limit) {
		return f, 0, errTooLarge
	}
	end := head + 4 + int(size)
	if len(b) < end {
		return f, 0, errIncomplete
	}
	mask := b[head : head+4]
	f.payload = b[head+4 : end]
	for i := range f.payload {
		f.payload[i] ^= mask[i&3]
	}
	return f, end, nil
}

var errTooLarge = errors.New("frame too large")

// readState is what a socket's reader does after the frames of one read.
type readState int

const (
	keepReading readState = iota // wait for more bytes
	handOff                      // a frame that may wait is in s.buf: a goroutine takes the socket over
	stopReading                  // the socket is closing
)

// frames handles every complete frame in b, in order, and returns the bytes of a frame not
// complete yet. On the poller's goroutine (loop true) it handles only the frames that never
// wait (see quick) and hands the socket over at the first other one: its message is left in
// s.buf and rest is what follows it.
func (s *session) frames(b []byte, loop bool) (rest []byte, st readState) {
	for {
		limit := schema.MaxFrameBytes // a message's, its fragments together
		if s.fragmented {
			limit -= len(s.buf)
		}
		f, n, err := parseFrame(b, limit)
		switch {
		case err == errIncomplete:
			return b, keepReading
		case err == errTooLarge:
			s.h.Metrics.FrameErrors.WithLabelValues("too_large").Inc()
			s.c.closeWith(fws.CloseMessageTooBig, "")
			return nil, stopReading
		case err != nil:
			s.h.Metrics.FrameErrors.WithLabelValues("protocol").Inc()
			s.c.closeWith(fws.CloseProtocolError, err.Error())
			return nil, stopReading
		}
		b = b[n:]
		switch f.op {
		case opPing:
			s.c.enqueue(opPong, append([]byte(nil), f.payload...))
			continue
		case opPong:
			continue
		case opClose:
			var msg []byte
			if len(f.payload) >= 2 {
				msg = fws.FormatCloseMessage(int(binary.BigEndian.Uint16(f.payload)), "")
			}
			s.c.queueClose(msg)
			return nil, stopReading
		}
		if (f.op == opContinuation) != s.fragmented {
			s.c.closeWith(fws.CloseProtocolError, "a continuation frame must follow a fragment, and only then")
			return nil, stopReading
		}
		if !s.fragmented {
			s.binary = f.op == opBinary
			if cap(s.buf) == 0 { // a socket's buffer is made with its first frame: idle ones hold none
				s.buf = make([]byte, 0, 512)
			}
			s.buf = s.buf[:0]
		}
		s.buf = append(s.buf, f.payload...)
		if s.fragmented = !f.fin; s.fragmented {
			continue
		}
		if !s.first.Load() {
			s.first.Store(true)
			if s.silent != nil {
				s.silent.Stop()
			}
		}
		if s.binary {
			s.refuseBinary()
			continue
		}
		if !s.validText(s.buf) {
			return nil, stopReading
		}
		if !loop {
			if !s.handle(s.buf) {
				return nil, stopReading
			}
			continue
		}
		received := time.Now()
		perr := frames.ParseClient(s.buf, &s.frame)
		if !quick(perr, &s.frame) {
			return b, handOff
		}
		if !s.answer(perr, received) {
			return nil, stopReading
		}
	}
}

// quick says whether a frame is answered without waiting, so on the poller's goroutine: a
// message without an attachment, typing, and a frame that does not parse (its answer is an
// error frame). Everything else may wait on the store or on the socket's own queue.
func quick(perr error, f *schema.ClientFrame) bool {
	return perr != nil || f.Type == schema.FrameMessage && f.File == "" || f.Type == schema.FrameTyping
}

// keep holds the bytes of a frame read in part (rest may be a part of s.pending itself).
func (s *session) keep(rest []byte) {
	if len(rest) == 0 {
		s.pending = nil // an idle socket holds no buffer
		return
	}
	s.pending = append(s.pending[:0], rest...)
}
