// Package testkit is what the tests of every module share (the edge's, the worker's,
// loadgen's): one way to wait for a condition, and require-style checks. For tests only.
package testkit

import (
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
