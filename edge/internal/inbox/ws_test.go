package inbox

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"spookat/schema/testkit"
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

// A batched socket's writer takes what waits for it when its window ends, not an event at a
// time; but a queue a quarter full is taken at once, window or not, so a burst never fills
// it and closes the socket as too slow. The batch still ends at batchMaxEvents, the rest
// waiting for the next one, in order.
func TestCollectTakesAFillingQueueBeforeItsWindowEnds(t *testing.T) {
	c := newOpConn(nil, 1)
	type batch struct {
		buf []byte
		n   int
	}
	got := make(chan batch, 1)
	go func() {
		buf, _, n := c.collect(nil, []byte("0"), nil, time.Hour)
		got <- batch{buf, n}
	}()
	const events = 300
	for i := 1; i < events; i++ {
		c.push([]byte(strconv.Itoa(i)))
		if i%(outboxEvents/2) == 0 {
			testkit.WaitFor(t, "the writer to take a filling queue", 5*time.Second, func() bool { return len(c.out) < outboxEvents/4 })
		}
	}
	var b batch
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("collect did not end its batch at batchMaxEvents within its hour's window")
	}
	if c.isGone() {
		t.Fatal("the socket was closed as too slow")
	}
	var ids []int
	if err := json.Unmarshal(b.buf, &ids); err != nil || b.n != batchMaxEvents || len(ids) != batchMaxEvents {
		t.Fatalf("a batch of %d events (%v): %.40s…", b.n, err, b.buf)
	}
	for i, id := range ids {
		if id != i {
			t.Fatalf("event %d of the batch is %d", i, id)
		}
	}
	if len(c.out) != events-batchMaxEvents {
		t.Fatalf("%d events left for the next batch, want %d", len(c.out), events-batchMaxEvents)
	}
}

func (c *opConn) isGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}
