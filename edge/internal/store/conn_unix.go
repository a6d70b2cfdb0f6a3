//go:build unix

package store

import (
	"math"
	"syscall"
)

// addressSpaceLimit is the process's address-space limit (RLIMIT_AS; infinity is the largest
// value on every system), math.MaxUint64 when it cannot be read.
func addressSpaceLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil {
		return math.MaxUint64
	}
	return r.Cur
}
