package widget

import (
	"encoding/binary"
	"sync"
)

// Server frames on the wire (RFC 6455 §5.2: final, unmasked).
const (
	opText  = 0x1
	opClose = 0x8
	opPong  = 0xA

	maxFrameHeader = 10
)

// newFrame is a frame of op with payload, in a slice of its own.
func newFrame(op byte, payload []byte) []byte {
	return appendFrame(make([]byte, 0, len(payload)+maxFrameHeader), op, payload)
}

// appendFrame appends a frame of op with payload to b.
func appendFrame(b []byte, op byte, payload []byte) []byte {
	b = append(b, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		b = append(b, byte(n))
	case n <= 0xFFFF:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

// flusher writes, on one goroutine for every socket, the queues of the sockets that have
// frames waiting: woken once for a commit's acks rather than a goroutine started for each.
type flusher struct {
	mu   sync.Mutex
	due  []*conn
	wake chan struct{}
	once sync.Once
}

var flush = &flusher{wake: make(chan struct{}, 1)}

// add gives c's queue to the flusher (its writer's turn and count in senders go with it).
func (f *flusher) add(c *conn) {
	f.once.Do(func() { go f.run() })
	f.mu.Lock()
	f.due = append(f.due, c)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *flusher) run() {
	var batch []*conn
	for range f.wake {
		f.mu.Lock()
		batch, f.due = f.due, batch[:0]
		f.mu.Unlock()
		for i, c := range batch {
			c.flushNow()
			batch[i] = nil
		}
	}
}
