package inbox

import (
	"testing"
	"time"
)

func TestNextWindow(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		span time.Duration
		n    int
		want time.Duration
	}{
		{"one event stays quiet", 25 * ms, 1, 25 * ms},
		{"two events in 25 ms are 40 a second: busy", 25 * ms, 2, 50 * ms},
		{"busy doubles again", 50 * ms, 4, 100 * ms},
		{"no longer than busyWindow", 100 * ms, 256, 100 * ms},
		{"between the two rates it stays", 100 * ms, 3, 100 * ms},
		{"quiet halves", 100 * ms, 2, 50 * ms},
		{"no shorter than batchWindow", 50 * ms, 1, 25 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextWindow(tc.span, tc.n); got != tc.want {
				t.Errorf("nextWindow(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
			}
		})
	}
}
