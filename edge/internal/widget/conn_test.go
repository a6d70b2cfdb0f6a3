package widget

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

// A socket's frames arrive whole and in order when the kernel takes them only in part (a
// small send buffer, a reader slower than the writer): a write continues where the kernel
// stopped, on both writers, the flusher's raw writes and the sender goroutine's.
func TestFramesArriveWholeUnderPartialWrites(t *testing.T) {
	for _, raw := range []bool{true, false} {
		t.Run(fmt.Sprint("raw=", raw), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			setBuf := func(nc net.Conn, opt int) {
				rc, err := nc.(syscall.Conn).SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
			}
			setBuf(server, syscall.SO_SNDBUF)
			setBuf(client, syscall.SO_RCVBUF)
			c := newNetConn(server)
			if c.raw == nil {
				t.Fatal("a TCP connection has no raw descriptor")
			}
			if !raw {
				c.raw = nil // the sender goroutine's writes only
			}

			const frames = 3000
			payload := func(i int) []byte { return fmt.Appendf(nil, "frame %06d %0100d", i, i) }
			errc := make(chan error, 1)
			go func() {
				r := bufio.NewReaderSize(client, 512)
				for i := range frames {
					var h [2]byte
					if _, err := io.ReadFull(r, h[:]); err != nil {
						errc <- fmt.Errorf("frame %d: %w", i, err)
						return
					}
					got := make([]byte, h[1])
					if _, err := io.ReadFull(r, got); err != nil {
						errc <- fmt.Errorf("frame %d: %w", i, err)
						return
					}
					if want := payload(i); h[0] != 0x80|opText || string(got) != string(want) {
						errc <- fmt.Errorf("frame %d: %x %q, want %q", i, h[0], got, want)
						return
					}
				}
				errc <- nil
			}()
			for i := range frames {
				if !c.send(payload(i)) {
					t.Fatalf("frame %d not queued: the socket is gone", i)
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			c.finish()
		})
	}
}
