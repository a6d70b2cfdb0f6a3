// Package testkit is what the tests of every module share (the edge's, the worker's,
// loadgen's): one way to wait for a condition, and require-style checks. For tests only.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms until it holds, failing the test after timeout with what
// it waited for.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NoErr fails the test at once when err is not nil.
func NoErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// LogBuffer is a bytes.Buffer that a logger writes from several goroutines while the test
// reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
