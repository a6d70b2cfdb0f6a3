package main

import (
	"strings"
	"testing"

	"spookat/edge/internal/edgetest"
)

func TestWithSysmonSetting(t *testing.T) {
	for _, c := range []struct {
		name, godebug, want string
		again               bool
	}{
		{"none set", "", "schedtrace=2147483647", true},
		{"others kept", "madvdontneed=1", "madvdontneed=1,schedtrace=2147483647", true},
		{"the operator's own", "schedtrace=0", "schedtrace=0", false},
		{"after the re-execution", "http2debug=1, schedtrace=2147483647", "http2debug=1, schedtrace=2147483647", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, again := withSysmonSetting(c.godebug)
			if got != c.want || again != c.again {
				t.Errorf("withSysmonSetting(%q) = %q, %v; want %q, %v", c.godebug, got, again, c.want, c.again)
			}
		})
	}
}

// The serving edge runs with the setting (read from the PID that was started: the same
// process, executed again), and an operator's own schedtrace is left alone.
func TestServingEdgeKeepsSysmonAwake(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	godebugOf := func(t *testing.T, p *edgetest.Proc) string {
		t.Helper()
		env, err := p.Environ()
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range env { // the first of a name is the one the runtime reads
			if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
				return v
			}
		}
		return ""
	}
	t.Run("default", func(t *testing.T) {
		t.Setenv("GODEBUG", "madvdontneed=1")
		p := edgetest.StartProc(t, bin, t.TempDir())
		if got := godebugOf(t, p); got != "madvdontneed=1,schedtrace=2147483647" {
			t.Errorf("GODEBUG of the serving edge: %q", got)
		}
		// ps, top and pgrep show the process under its binary's name.
		if comm, err := p.Comm(); err != nil || comm != "edge" {
			t.Errorf("the serving edge's name is %q (%v), want edge", comm, err)
		}
	})
	t.Run("the operator's schedtrace", func(t *testing.T) {
		t.Setenv("GODEBUG", "schedtrace=0")
		p := edgetest.StartProc(t, bin, t.TempDir())
		if got := godebugOf(t, p); got != "schedtrace=0" {
			t.Errorf("GODEBUG of the serving edge: %q", got)
		}
	})
}
