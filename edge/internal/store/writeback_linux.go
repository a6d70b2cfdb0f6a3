package store

import "golang.org/x/sys/unix"

// syncRange has the kernel start writing the dirty pages of [off, off+n) of fd, without
// waiting for them (a variable: tests make it fail). The call returns at once unless the
// device's queue is full; SQLite's fdatasync then waits only for what is still in flight. An
// error of those writes is the fdatasync's to report (the kernel tells each open file once).
var syncRange = func(fd int, off, n int64) error {
	return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
}
