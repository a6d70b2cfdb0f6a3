package store

import "golang.org/x/sys/unix"

// syncRange has the kernel write the dirty pages of [off, off+n) of fd and waits for them
// (a variable: tests make it fail).
var syncRange = func(fd int, off, n int64) error {
	return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}
