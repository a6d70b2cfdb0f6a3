package schema

import (
	"flag"
	"strings"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// One rule for both binaries: every flag not on the command line is read from SPOOKAT_<NAME>;
// the command line wins; a value the flag refuses names the variable.
func TestFlagsFromEnv(t *testing.T) {
	newSet := func() (*flag.FlagSet, *string, *time.Duration, *bool) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		return fs, fs.String("nats-url", "nats://default", ""), fs.Duration("stop-timeout", time.Second, ""), fs.Bool("allow-private-targets", false, "")
	}
	t.Setenv("SPOOKAT_NATS_URL", "tls://from-env:4222")
	t.Setenv("SPOOKAT_STOP_TIMEOUT", "7s")
	t.Setenv("SPOOKAT_ALLOW_PRIVATE_TARGETS", "true")
	for _, c := range []struct {
		args []string
		url  string
	}{
		{nil, "tls://from-env:4222"},
		{[]string{"-nats-url", "nats://flag:4222"}, "nats://flag:4222"},
	} {
		fs, url, stop, private := newSet()
		testkit.NoErr(t, fs.Parse(c.args))
		testkit.NoErr(t, FlagsFromEnv(fs))
		if *url != c.url || *stop != 7*time.Second || !*private {
			t.Errorf("args %v: url %q stop %s private %v", c.args, *url, *stop, *private)
		}
	}
	t.Setenv("SPOOKAT_STOP_TIMEOUT", "soon")
	fs, _, _, _ := newSet()
	fs.Parse(nil)
	if err := FlagsFromEnv(fs); err == nil || !strings.Contains(err.Error(), "SPOOKAT_STOP_TIMEOUT") {
		t.Errorf("a bad value: %v, want an error naming the variable", err)
	}
	if EnvName("nats-tls-ca") != "SPOOKAT_NATS_TLS_CA" {
		t.Errorf("EnvName = %s", EnvName("nats-tls-ca"))
	}
}
