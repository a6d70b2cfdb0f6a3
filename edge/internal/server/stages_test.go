package server

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// At stop every signal runs first, in start order; then every stop in reverse order of start,
// each under the one deadline; a stop that overruns it is logged and the stops after it still
// run (closing the store, which persists the watermark, is near the end).
func TestStagesStopInReverseUnderOneDeadline(t *testing.T) {
	t.Run("the runner", func(t *testing.T) {
		var mu sync.Mutex
		var calls []string
		var deadlines []time.Time
		note := func(s string) { mu.Lock(); calls = append(calls, s); mu.Unlock() }
		stopOf := func(name string, overrun bool) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				note("stop " + name)
				dl, _ := ctx.Deadline()
				deadlines = append(deadlines, dl)
				if overrun {
					<-ctx.Done()
				}
				return nil
			}
		}
		list := []stage{
			{name: "a", stop: stopOf("a", false)},
			{name: "b", signal: func() { note("signal b") }, stop: stopOf("b", false)},
			{name: "c", stop: stopOf("c", true)}, // outlives the deadline
			{name: "d", signal: func() { note("signal d") }},
			{name: "e", stop: stopOf("e", false)},
		}
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		stopAll(ctx, list, slog.New(slog.NewTextHandler(&logs, nil)))
		want := []string{"signal b", "signal d", "stop e", "stop c", "stop b", "stop a"}
		if !slices.Equal(calls, want) {
			t.Fatalf("calls %v, want %v", calls, want)
		}
		want0, _ := ctx.Deadline()
		for i, dl := range deadlines {
			if !dl.Equal(want0) {
				t.Errorf("stop %d ran under deadline %v, want the one deadline %v", i, dl, want0)
			}
		}
		if !bytes.Contains(logs.Bytes(), []byte("stop: c ran out of time")) {
			t.Errorf("the overrun is not logged:\n%s", logs.String())
		}
	})

	t.Run("a real edge", func(t *testing.T) {
		var logs testkit.LogBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		e := New(Config{DataDir: t.TempDir(), Addr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0",
			InprocWorker: true, PublicURL: "http://127.0.0.1"}, log)
		testkit.NoErr(t, e.Start(context.Background()))
		ctx, cancel := context.WithTimeout(context.Background(), DefaultStopTimeout)
		defer cancel()
		e.Stop(ctx)
		var want []string
		for _, st := range slices.Backward(e.stages()) {
			if st.stop != nil {
				want = append(want, st.name)
			}
		}
		var got []string
		for _, m := range regexp.MustCompile(`msg="stopped ([^"]+)"`).FindAllStringSubmatch(logs.String(), -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, want) {
			t.Fatalf("stopped %v, want every stage with a stop, in reverse order of start: %v\n%s", got, want, logs.String())
		}
		if strings.Contains(logs.String(), "level=WARN msg=stop:") {
			t.Fatalf("a stage stopped with an error or past the deadline:\n%s", logs.String())
		}
	})

	t.Run("a failed start stops what started", func(t *testing.T) {
		var logs testkit.LogBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		dir := t.TempDir()
		e := New(Config{DataDir: dir, Addr: "127.0.0.1:0", NATSListen: "no-such-host.invalid:99999"}, log)
		if err := e.Start(context.Background()); err == nil {
			t.Fatal("an edge with an impossible NATS address started")
		}
		var got []string
		for _, m := range regexp.MustCompile(`msg="stopped ([^"]+)"`).FindAllStringSubmatch(logs.String(), -1) {
			got = append(got, m[1])
		}
		if want := []string{"NATS", "store", "metrics listener", "data directory lock"}; !slices.Equal(got, want) {
			t.Fatalf("stopped %v, want %v\n%s", got, want, logs.String())
		}
		// The lock is free again: a second edge may take the directory.
		again := New(Config{DataDir: dir}, log)
		if err := again.lockData(context.Background()); err != nil {
			t.Fatalf("the lock was not released: %v", err)
		}
		_ = again.unlockData(context.Background())
	})
}
