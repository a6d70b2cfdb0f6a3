package main

import (
	"strings"
	"testing"
)

// A bad stream budget stops the edge before it opens anything, naming the flag and an example.
func TestStreamBudgetFlagsRefuseBadSizes(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"not a size", []string{"-jobs-max-bytes", "lots"}, []string{"-jobs-max-bytes", "e.g. 1GiB"}},
		{"too small", []string{"-results-max-bytes", "4KiB"}, []string{"-results-max-bytes", "below 64KiB", "e.g. 1GiB"}},
		{"negative", []string{"-dead-max-bytes", "-5MiB"}, []string{"-dead-max-bytes", "e.g. 1GiB"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := run(append(c.args, "-data", t.TempDir()))
			if err == nil {
				t.Fatalf("edge %v started", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("edge %v: %q does not say %q", c.args, err, w)
				}
			}
		})
	}
}
