package store

import "golang.org/x/sys/unix"

// writeRange writes the dirty pages of [off, off+n) of fd and waits for them; errors are
// left to the fdatasync that follows, which reports them.
func writeRange(fd int, off, n int64) {
	_ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}
