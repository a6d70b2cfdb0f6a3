package sockets

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// fakeListener returns what its accept field says.
type fakeListener struct {
	net.Listener
	accept func() (net.Conn, error)
}

func (f *fakeListener) Accept() (net.Conn, error) { return f.accept() }
func (f *fakeListener) Close() error              { return nil }

func TestAcceptErrorsBackOff(t *testing.T) {
	fails := 6
	want, _ := net.Pipe()
	inner := &fakeListener{accept: func() (net.Conn, error) {
		if fails > 0 {
			fails--
			return nil, &net.OpError{Op: "accept", Err: syscall.EMFILE}
		}
		return want, nil
	}}
	var slept []time.Duration
	failed := 0
	l := &Listener{Listener: inner, AcceptFailed: func() { failed++ },
		Sleep: func(d time.Duration) { slept = append(slept, d) }}
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("accept returned %v; want it to retry until a connection comes", err)
	}
	if c.(*conn).Conn != want {
		t.Fatal("accept returned another connection")
	}
	if failed != 6 {
		t.Errorf("AcceptFailed called %d times, want 6", failed)
	}
	if got := fmt.Sprint(slept); got != "[5ms 10ms 20ms 40ms 80ms 160ms]" {
		t.Errorf("back-off %s", got)
	}
}

func TestAcceptClosedReturns(t *testing.T) {
	inner := &fakeListener{accept: func() (net.Conn, error) { return nil, net.ErrClosed }}
	l := &Listener{Listener: inner, Sleep: func(time.Duration) { t.Fatal("a closed listener must not be retried") }}
	if _, err := l.Accept(); err != net.ErrClosed {
		t.Fatalf("got %v, want net.ErrClosed", err)
	}
}

func TestBudget(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.NoErr(t, err)
	refused := make(chan struct{}, 10)
	l := &Listener{Listener: inner, Max: 2, Refused: func() { refused <- struct{}{} }}
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		testkit.NoErr(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	var held []net.Conn
	for range 2 {
		dial()
		held = append(held, <-accepted)
	}
	t.Run("past the cap a client reads 503 and a reason", func(t *testing.T) {
		c := dial()
		fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		testkit.NoErr(t, err)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"busy"`) {
			t.Fatalf("got %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		<-refused
		if l.Open() != 2 {
			t.Errorf("open %d, want 2", l.Open())
		}
	})
	t.Run("a closed connection frees its place", func(t *testing.T) {
		held[0].Close()
		held[0].Close() // twice: counted once
		if l.Open() != 1 {
			t.Fatalf("open %d after a close, want 1", l.Open())
		}
		dial()
		select {
		case <-accepted:
		case <-refused:
			t.Fatal("refused with a free place")
		}
	})
}

// Setup slots: Accept hands out at most Setup connections that have had no answer; an
// answer (SetupDone), a close, or SetupHold frees a slot for the next one.
func TestSetupSlotsBoundAccepts(t *testing.T) {
	inner := &fakeListener{accept: func() (net.Conn, error) { c, _ := net.Pipe(); return c, nil }}
	l := &Listener{Listener: inner, Setup: 2, SetupHold: 300 * time.Millisecond}
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	next := func(within time.Duration) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(within):
			return nil
		}
	}
	a, b := next(time.Second), next(time.Second)
	if a == nil || b == nil {
		t.Fatal("the first two connections were not accepted")
	}
	if c := next(100 * time.Millisecond); c != nil {
		t.Fatal("a third connection was accepted while two had no answer")
	}
	SetupDone(a)
	SetupDone(a) // twice is once
	c := next(time.Second)
	if c == nil {
		t.Fatal("an answered connection did not free its slot")
	}
	if d := next(100 * time.Millisecond); d != nil {
		t.Fatal("a second SetupDone of the same connection freed another slot")
	}
	b.Close()
	if next(time.Second) == nil {
		t.Fatal("a closed connection did not free its slot")
	}
	// c and the last one hold the slots now; SetupHold frees them without an answer.
	start := time.Now()
	if next(2*time.Second) == nil {
		t.Fatal("SetupHold did not free a slot held by a silent connection")
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("a slot was freed after %s, before SetupHold", took)
	}
}

// A connection the listener hands out still reaches its socket (the widget writes acks through
// it without a goroutine waiting): nothing in between hides syscall.Conn.
func TestAcceptedConnKeepsItsSocket(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.NoErr(t, err)
	l := &Listener{Listener: inner}
	defer l.Close()
	c, err := net.Dial("tcp", inner.Addr().String())
	testkit.NoErr(t, err)
	defer c.Close()
	got, err := l.Accept()
	testkit.NoErr(t, err)
	defer got.Close()
	sc, ok := got.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is no syscall.Conn", got)
	}
	raw, err := sc.SyscallConn()
	testkit.NoErr(t, err)
	var fd uintptr
	testkit.NoErr(t, raw.Control(func(f uintptr) { fd = f }))
	if fd == 0 {
		t.Fatal("no descriptor")
	}
}
