//go:build !linux

package store

// writeRange is Linux's sync_file_range; elsewhere the fdatasync does all the writing.
func writeRange(fd int, off, n int64) {}
