//go:build !linux

package store

import "syscall"

// syncOffP is false elsewhere: SQLite's own sync serves (see offp_linux.go).
const syncOffP = false

func syncData(fd uintptr) error { return syscall.Fsync(int(fd)) }

// processCPU is the CPU time the process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
