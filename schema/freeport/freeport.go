// Package freeport picks the loopback ports of the processes that tests and loadgen start
// (an edge, a worker, a NATS node), which must be told their port before they listen.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// below is where the ports Addr picks start: under the kernel's range for outgoing
// connections' local ports (ip_local_port_range, 32768–60999 by default on Linux, 49152–65535
// elsewhere) and above most services' ports.
const below = 10000

// Addr returns "127.0.0.1:port" for a port nobody listens on right now. The port is taken
// under the range the kernel gives outgoing connections, where it can: a port of that range,
// freed and handed to a process about to listen, can meanwhile become the local port of a
// connection any other test opens, and the process then fails with "address already in use".
func Addr() (string, error) {
	if lo := ephemeralStart(); lo > below {
		for range 64 {
			if addr, err := listen(below + rand.IntN(lo-below)); err == nil {
				return addr, nil
			}
		}
	}
	return listen(0) // any port the kernel gives
}

// listen listens on port of 127.0.0.1 for a moment and returns its address: free now.
func listen(port int) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ephemeralStart is the first port of the kernel's range for outgoing connections (Linux's
// default where it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 || n > 65535 {
		return 32768
	}
	return n
}
