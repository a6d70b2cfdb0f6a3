package store

import (
	"syscall"
	_ "unsafe" // go:linkname
)

// The runtime's own way into a system call it knows will block: the P goes to another thread
// at once rather than when the runtime's monitor next looks (see syncData). Both are kept
// reachable by linkname for programs outside the standard library (go.dev/issue/67401).
//
//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// fdatasyncOffP is fdatasync(2) made the way syscall.Syscall makes a call, but announced as
// blocking. Nothing between the two runtime calls may grow the stack or need the P: hence
// RawSyscall6, as in syscall.Syscall (no race or coverage instrumentation inside it).
//
//go:nosplit
func fdatasyncOffP(fd uintptr) syscall.Errno {
	entersyscallblock()
	_, _, errno := syscall.RawSyscall6(syscall.SYS_FDATASYNC, fd, 0, 0, 0, 0, 0)
	exitsyscall()
	return errno
}

// syncOffP says syncData leaves the P while it waits.
const syncOffP = true

// syncData waits until the data written to fd is on the disk, without holding the scheduler's
// P meanwhile. On the edge's usual one core (GOMAXPROCS 1) a goroutine in an ordinary system
// call keeps the only P until the runtime's monitor takes it back, and on a busy process the
// monitor looks every 10 ms: a checkpoint's fdatasync of 3–10 ms stopped every socket read,
// commit and ack for as long. Handed off at once, the P runs the others while the disk works.
// The price is two thread switches a sync: right for the checkpoint's few syncs a second, not
// for the writer's WAL under -sync full, which syncs every commit (that cost more CPU a
// message than it freed; bench/path.md, tenth session).
func syncData(fd uintptr) error {
	for {
		switch errno := fdatasyncOffP(fd); errno {
		case 0:
			return nil
		case syscall.EINTR:
		default:
			return errno
		}
	}
}

// napOffP gives the core away for a moment (sched_yield) in a system call announced as
// blocking: the P goes at once to another thread, which runs what is ready (the network poll
// included) or finds nothing and lets the P go, so on an idle process the nap ends as soon as
// that thread has looked, not after the millisecond a timer's nap takes (yieldNow). The price
// is two thread switches a nap.
//
//go:nosplit
func napOffP() {
	entersyscallblock()
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	exitsyscall()
}
