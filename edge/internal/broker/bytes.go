package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinStreamBytes is the smallest byte budget a stream may get: below it JOBS holds only a
// handful of jobs (one may be up to the 1 MiB NATS payload, most are under 1 KiB).
const MinStreamBytes = 64 << 10

var byteUnits = []struct {
	suffix string
	scale  int64
}{ // longest suffixes first, so "MiB" is not read as "B"
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseBytes reads a size such as 1GiB, 512MiB, 64KiB, 2GB or 1048576 (bytes). Binary
// suffixes (KiB, MiB, GiB, TiB and the bare K, M, G, T) are powers of 1024, KB, MB, GB and TB
// powers of 1000; case does not matter.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			t, scale = strings.TrimSpace(n), u.scale
			break
		}
	}
	if t == "" {
		return 0, fmt.Errorf("%q is not a size: give a number and a unit, e.g. 1GiB or 512MiB", s)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 || n > (1<<62)/scale {
			return 0, fmt.Errorf("%q is out of range: give e.g. 1GiB or 512MiB", s)
		}
		return n * scale, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(scale) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size: give a number and a unit, e.g. 1GiB or 512MiB", s)
	}
	return int64(f * float64(scale)), nil
}

// FormatBytes writes a size the way ParseBytes reads it, in the largest binary unit that
// divides it (1GiB, 1536MiB, 65537B).
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.scale && n%u.scale == 0 {
			return strconv.FormatInt(n/u.scale, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// Bytes is a flag holding a stream's byte budget: sizes as ParseBytes reads them, at least
// MinStreamBytes.
type Bytes int64

// String implements flag.Value.
func (b *Bytes) String() string {
	if b == nil {
		return ""
	}
	return FormatBytes(int64(*b))
}

// Set implements flag.Value.
func (b *Bytes) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	if n < MinStreamBytes {
		return errors.New("below 64KiB a stream holds only a few messages: give e.g. 1GiB or 512MiB")
	}
	*b = Bytes(n)
	return nil
}
