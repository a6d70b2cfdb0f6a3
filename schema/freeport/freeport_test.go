package freeport

import (
	"net"
	"strconv"
	"testing"
)

// An address Addr gives is on loopback, under the range of outgoing connections' local
// ports, and free: a listener can take it.
func TestAddr(t *testing.T) {
	lo := ephemeralStart()
	seen := map[string]bool{}
	for range 50 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("Addr() = %q, want a 127.0.0.1 address", addr)
		}
		port, _ := strconv.Atoi(p)
		if lo > below && (port < below || port >= lo) {
			t.Fatalf("port %d outside [%d, %d)", port, below, lo)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the port Addr gave is not free: %v", err)
		}
		ln.Close()
		seen[addr] = true
	}
	if len(seen) < 40 {
		t.Fatalf("50 calls gave %d addresses: they are not spread", len(seen))
	}
}

// A busy port is not given.
func TestAddrSkipsABusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	if _, err := listen(port); err == nil {
		t.Fatalf("listen(%d) says a port in use is free", port)
	}
}
