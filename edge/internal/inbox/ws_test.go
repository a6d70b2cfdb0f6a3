package inbox

import (
	"encoding/json"
	"strconv"
	"strings"
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
// it and closes the socket as too slow. The events go out as one JSON array, in order, and
// what came after the take waits for the next batch.
func TestGatherTakesAFillingQueueBeforeItsWindowEnds(t *testing.T) {
	c := newOpConn(nil, 1)
	out := newOpWriter(c, true)
	out.span, out.last = time.Hour, time.Now() // a busy socket's window, as long as can be
	got := make(chan []int, 1)
	go func() {
		<-c.ready
		out.gather()
		var ids []int
		_ = out.frames(func(b []byte) error { return json.Unmarshal(b, &ids) })
		got <- ids
	}()
	for i := range outboxEvents / 2 { // a burst: the writer wakes once a quarter waits
		c.push([]byte(strconv.Itoa(i)))
	}
	var ids []int
	select {
	case ids = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("gather did not end its batch when the queue filled, within its hour's window")
	}
	if c.isGone() {
		t.Fatal("the socket was closed as too slow")
	}
	if len(ids) < outboxEvents/4 || len(ids) > outboxEvents/2 {
		t.Fatalf("a batch of %d events, want from %d to %d", len(ids), outboxEvents/4, outboxEvents/2)
	}
	for i, id := range ids {
		if id != i {
			t.Fatalf("event %d of the batch is %d", i, id)
		}
	}
	c.push([]byte("-1"))
	var rest []int
	testkit.NoErr(t, json.Unmarshal(append(c.queued, ']'), &rest))
	if len(ids)+len(rest) != outboxEvents/2+1 || rest[len(rest)-1] != -1 || (len(rest) > 1 && rest[0] != len(ids)) {
		t.Fatalf("the next batch holds %v after a batch of %d", rest, len(ids))
	}
}

// A socket whose writer does not take its events is closed once outboxEvents wait, and its
// queue stops growing; a socket without ?batch=1 gets each event as a frame of its own.
func TestQueueBoundsAndFrames(t *testing.T) {
	t.Run("too slow", func(t *testing.T) {
		c := newOpConn(nil, 1)
		for i := range outboxEvents + 10 {
			c.push([]byte(strconv.Itoa(i)))
			if gone := c.isGone(); gone != (i >= outboxEvents) {
				t.Fatalf("after event %d the socket is gone: %v", i, gone)
			}
		}
		if len(c.ends) != outboxEvents {
			t.Fatalf("%d events queued, want %d", len(c.ends), outboxEvents)
		}
	})
	t.Run("one frame an event", func(t *testing.T) {
		c := newOpConn(nil, 1)
		events := []string{`{"type":"a"}`, `{"type":"b","n":[1,2]}`, `{}`}
		for _, e := range events {
			c.push([]byte(e))
		}
		out := newOpWriter(c, false)
		<-c.ready
		if n := out.gather(); n != len(events) {
			t.Fatalf("gathered %d events, want %d", n, len(events))
		}
		var frames []string
		testkit.NoErr(t, out.frames(func(b []byte) error { frames = append(frames, string(b)); return nil }))
		if strings.Join(frames, "|") != strings.Join(events, "|") {
			t.Fatalf("frames %q, want %q", frames, events)
		}
	})
}

func (c *opConn) isGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}
