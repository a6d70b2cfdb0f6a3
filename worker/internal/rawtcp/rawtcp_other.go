//go:build !linux

package rawtcp

import "net"

// Wrap returns c: raw system calls are Linux's here.
func Wrap(c net.Conn) net.Conn { return c }
