package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"spookat/schema/testkit"
)

// stderrOf runs fn with os.Stderr going to a pipe and returns what it wrote.
func stderrOf(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	testkit.NoErr(t, err)
	old := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() { b, _ := io.ReadAll(r); got <- string(b) }()
	fn()
	os.Stderr = old
	w.Close()
	return <-got
}

// `loadgen help CMD` is CMD's flags, and every flag's value placeholder is one word (Go's
// flag package takes a back-quoted word of the usage as the placeholder).
func TestHelpOfEachCommand(t *testing.T) {
	placeholder := regexp.MustCompile(`(?m)^  -[a-z-]+ ([^\n]*)$`)
	for _, cmd := range []string{"run", "flood", "compare", "idle"} {
		t.Run(cmd, func(t *testing.T) {
			var err error
			out := stderrOf(t, func() { err = dispatch(context.Background(), []string{"help", cmd}) })
			if !errors.Is(err, flag.ErrHelp) {
				t.Errorf("err = %v, want flag.ErrHelp", err)
			}
			if !strings.Contains(out, "usage: loadgen "+cmd) || strings.Contains(out, "commands:") {
				t.Errorf("help %s printed another text:\n%s", cmd, out)
			}
			for _, m := range placeholder.FindAllStringSubmatch(out, -1) {
				if strings.Contains(m[1], " ") {
					t.Errorf("a flag's placeholder is several words: %q", m[0])
				}
			}
		})
	}
	if err := dispatch(context.Background(), []string{"nonsense"}); !errors.As(err, new(unknownCommand)) {
		t.Errorf("unknown command: %v", err)
	}
}
