//go:build !linux

package store

import (
	"syscall"
	"time"
)

// syncOffP is false elsewhere: SQLite's own sync serves (see offp_linux.go).
const syncOffP = false

func syncData(fd uintptr) error { return syscall.Fsync(int(fd)) }

// napOffP is a timer's nap elsewhere (see offp_linux.go).
func napOffP() { time.Sleep(yieldNap) }
