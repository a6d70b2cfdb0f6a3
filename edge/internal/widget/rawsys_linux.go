package widget

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The socket reads and writes of the visitor's path, and the poller's look at its epoll set,
// are system calls on non-blocking descriptors: they return at once, having done the work or
// not. Made through syscall.Read and Write they tell the scheduler they may block; on the
// edge's one P that hands the scheduler's monitor a P to take back and a reason to wake every
// 20 µs, and each return has to take the P back. Made raw they are plain calls.

// rawRead is read(2) on a non-blocking descriptor.
func rawRead(fd int, p []byte) (int, error) { return rawIO(syscall.SYS_READ, fd, p) }

// rawWrite is write(2) on a non-blocking descriptor.
func rawWrite(fd int, p []byte) (int, error) { return rawIO(syscall.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2), as syscall.Read and Write answer (-1 and the errno on error).
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// rawEpollNow is epoll_wait(2) with a zero timeout: what the set has ready now.
func rawEpollNow(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}
