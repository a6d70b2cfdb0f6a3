package frames

import (
	"unicode/utf8"
	"unsafe"
)

func utf8Valid(b []byte) bool { return utf8.Valid(b) }

// unsafeString views b as a string without copying; callers copy what they keep.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
