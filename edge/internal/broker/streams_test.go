package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
	"spookat/schema"
	"spookat/schema/natsauth"
)

// An install from before the byte budgets (JOBS, RESULTS and DEAD unbounded, JOBS discarding
// old) gets them at the next start; a changed flag is applied the same way.
func TestStreamBudgetsAppliedOnEveryStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := func(l schema.StreamLimits) (*broker.Broker, jetstream.JetStream) {
		t.Helper()
		br, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth, Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(br.NC)
		if err != nil {
			t.Fatal(err)
		}
		return br, js
	}

	br, js := start(schema.StreamLimits{})
	for _, cfg := range schema.StreamConfigs(1, schema.StreamLimits{}) { // as it was before budgets
		cfg.MaxBytes, cfg.Discard = -1, jetstream.DiscardOld
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatalf("unbound %s: %v", cfg.Name, err)
		}
	}
	br.Close()

	for _, c := range []struct {
		name   string
		limits schema.StreamLimits
		want   map[string]int64
	}{
		{"defaults on an old install", schema.StreamLimits{},
			map[string]int64{schema.StreamJobs: 1 << 30, schema.StreamResults: 1 << 30, schema.StreamDead: 256 << 20}},
		{"changed flags", schema.StreamLimits{JobsMaxBytes: 2 << 30, ResultsMaxBytes: 128 << 20, DeadMaxBytes: 64 << 20},
			map[string]int64{schema.StreamJobs: 2 << 30, schema.StreamResults: 128 << 20, schema.StreamDead: 64 << 20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			br, js := start(c.limits)
			defer br.Close()
			wantDiscard := map[string]jetstream.DiscardPolicy{
				schema.StreamJobs: jetstream.DiscardNew, schema.StreamResults: jetstream.DiscardOld, schema.StreamDead: jetstream.DiscardOld}
			for name, max := range c.want {
				s, err := js.Stream(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				cfg := s.CachedInfo().Config
				if cfg.MaxBytes != max || cfg.Discard != wantDiscard[name] {
					t.Errorf("%s: MaxBytes %d, discard %v; want %d, %v", name, cfg.MaxBytes, cfg.Discard, max, wantDiscard[name])
				}
			}
		})
	}
}

// Budgets beyond what JetStream may store (75 % of the free disk, embedded) stop the edge with
// the flags to change.
func TestStreamBudgetsBeyondTheDiskNameTheFlags(t *testing.T) {
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	br, err := broker.Start(context.Background(), broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth,
		Limits: schema.StreamLimits{ResultsMaxBytes: 1 << 60}})
	if err == nil {
		br.Close()
		t.Fatal("started with a 1 EiB RESULTS budget")
	}
	for _, want := range []string{"-results-max-bytes 1048576TiB", "-jobs-max-bytes 1GiB", "insufficient storage", "e.g. -results-max-bytes 256MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
