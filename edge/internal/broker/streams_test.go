package broker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
)

// An install from before the byte budgets (JOBS, RESULTS and DEAD unbounded, JOBS discarding
// old) gets them at the next start; a changed flag is applied the same way.
func TestStreamBudgetsAppliedOnEveryStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	testkit.NoErr(t, err)
	start := func(l schema.StreamLimits) (*broker.Broker, jetstream.JetStream) {
		t.Helper()
		br, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth, Limits: l})
		testkit.NoErr(t, err)
		js, err := jetstream.New(br.NC)
		testkit.NoErr(t, err)
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
				testkit.NoErr(t, err)
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
	testkit.NoErr(t, err)
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

// The edge computes a conversation's partition itself for batches (schema.JobPartition); it
// must be the one the JOBS stream's transform stamps on a single job of that conversation, or
// a conversation's jobs from before and after an upgrade would sit in two partitions, out of
// order.
func TestJobPartitionIsTheStreamTransforms(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	auth, err := natsauth.Open(dir)
	testkit.NoErr(t, err)
	br, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", DataDir: dir, Auth: auth})
	testkit.NoErr(t, err)
	defer br.Close()
	js, err := jetstream.New(br.NC)
	testkit.NoErr(t, err)
	s, err := js.Stream(ctx, schema.StreamJobs)
	testkit.NoErr(t, err)
	parts := map[int]bool{}
	for _, sc := range [][2]int64{{1, 1}, {1, 2}, {7, 99}, {12, 3456}, {1200, 987654}, {3, 1 << 40}} {
		for d := range int64(20) {
			site, conv := sc[0], sc[1]+d
			ack, err := js.Publish(ctx, schema.JobSubject(schema.LaneChat, site, conv), []byte("{}"))
			testkit.NoErr(t, err)
			m, err := s.GetMsg(ctx, ack.Sequence)
			testkit.NoErr(t, err)
			want := "jobs.chat." + strconv.Itoa(schema.JobPartition(site, conv)) + "." + strconv.FormatInt(site, 10) + "." + strconv.FormatInt(conv, 10)
			if m.Subject != want {
				t.Fatalf("site %d conversation %d stored as %s, JobPartition says %s", site, conv, m.Subject, want)
			}
			parts[schema.JobPartition(site, conv)] = true
		}
	}
	if len(parts) < schema.JobPartitions/2 {
		t.Errorf("120 conversations in only %d partitions", len(parts))
	}
}
