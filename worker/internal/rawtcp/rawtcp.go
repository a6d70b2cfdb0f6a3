// Package rawtcp gives the worker's TCP connections reads and writes made as raw system calls.
//
// A read or write through net.Conn tells Go's scheduler that it may block (entersyscall). On
// a worker pinned to one core, that wakes the scheduler's monitor (sysmon) whenever the
// process had gone idle, and the monitor then ticks every 20 µs until it has had a
// millisecond with nothing to do: with a post every few hundred microseconds it never has.
// A socket's descriptor is non-blocking, so its read(2) and write(2) return at once: made
// raw, the call is a plain function call to the scheduler, and only waiting for the socket
// (EAGAIN) parks the goroutine, in Go's netpoller, deadlines included, as net.Conn does.
package rawtcp

import (
	"context"
	"net"
)

// Dialer dials like d and wraps what it connects (Wrap).
type Dialer struct{ D *net.Dialer }

// DialContext is net.Dialer's, with the connection wrapped.
func (d Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.D.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}

// Dial is DialContext without a context (nats.CustomDialer's shape).
func (d Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// WrapDial wraps what dial connects (fasthttp's Dial).
func WrapDial(dial func(addr string) (net.Conn, error)) func(addr string) (net.Conn, error) {
	return func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c), nil
	}
}
