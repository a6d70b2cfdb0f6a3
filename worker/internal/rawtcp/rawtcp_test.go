package rawtcp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"spookat/worker/internal/rawtcp"
)

// pair is a wrapped client connection and the server's end of it.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = rawtcp.Dialer{D: &net.Dialer{Timeout: 5 * time.Second}}.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestWrapsTCPOnly(t *testing.T) {
	c, _ := pair(t)
	if _, isTCP := c.(*net.TCPConn); isTCP == (runtime.GOOS == "linux") {
		t.Fatalf("on %s the dialed connection is %T", runtime.GOOS, c)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if rawtcp.Wrap(a) != a {
		t.Fatal("a pipe was wrapped")
	}
}

func TestRoundTripAndEOF(t *testing.T) {
	c, s := pair(t)
	if n, err := c.Write([]byte("ping")); n != 4 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := io.ReadFull(s, buf[:4]); n != 4 || err != nil || string(buf[:4]) != "ping" {
		t.Fatalf("server read %q %v", buf[:n], err)
	}
	if _, err := s.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(c, buf[:4]); n != 4 || err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("client read %q %v", buf[:n], err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d %v", n, err)
	}
	s.Close()
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d %v, want io.EOF", n, err)
	}
}

// A write larger than both sockets' buffers waits for room (EAGAIN) and then goes on.
func TestWriteWaitsForRoom(t *testing.T) {
	c, s := pair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<21) // 32 MiB: more than the kernel buffers on both ends
	done := make(chan error, 1)
	go func() {
		n, err := c.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		done <- err
	}()
	got, err := io.ReadAll(io.LimitReader(s, int64(len(want))))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not what was written", len(got))
	}
}

func TestDeadlinesAndClose(t *testing.T) {
	t.Run("read deadline", func(t *testing.T) {
		c, _ := pair(t)
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(make([]byte, 8))
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err %v: want a timeout", err)
		}
	})
	t.Run("write deadline", func(t *testing.T) {
		c, _ := pair(t)
		c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := c.Write(make([]byte, 64<<20)) // nobody reads: the buffers fill
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() || n >= 64<<20 {
			t.Fatalf("wrote %d, err %v: want less than all of it and a timeout", n, err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		c, _ := pair(t)
		c.Close()
		if _, err := c.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after close: %v", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		c, s := pair(t)
		s.(*net.TCPConn).SetLinger(0)
		s.Close() // RST
		var err error
		for i := 0; i < 100 && err == nil; i++ {
			_, err = c.Write([]byte("x"))
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "write" || oe.Addr == nil {
			t.Fatalf("write to a reset connection: %v", err)
		}
	})
}

// A read blocked on one goroutine is woken by a write from the other end while this end
// writes too (one Read and one Write at once, as HTTP and NATS clients do).
func TestReadAndWriteAtOnce(t *testing.T) {
	c, s := pair(t)
	go io.Copy(s, s) // echo
	const n = 1000
	errs := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := c.Write([]byte("0123456789")); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	got, err := io.ReadAll(io.LimitReader(c, n*10))
	if err != nil || len(got) != n*10 {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
