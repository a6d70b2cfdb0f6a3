//go:build !linux

package store

// syncRange is Linux's sync_file_range; elsewhere the fdatasync does all the writing.
func syncRange(fd int, off, n int64) {}
