//go:build !linux

package widget

import "syscall"

func rawWrite(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }
