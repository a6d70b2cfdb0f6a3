//go:build !unix

package store

import "math"

// addressSpaceLimit: no RLIMIT_AS here.
func addressSpaceLimit() uint64 { return math.MaxUint64 }
