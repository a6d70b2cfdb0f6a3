package members

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
	"spookat/schema/testkit"
)

// startJS runs a JetStream server in t.TempDir() with the worker buckets made.
func startJS(t *testing.T, ctx context.Context) (jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	testkit.NoErr(t, err)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	testkit.NoErr(t, err)
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	testkit.NoErr(t, schema.EnsureWorkerBuckets(ctx, js, 1, 2*time.Second))
	kv, err := js.KeyValue(ctx, schema.BucketWorkers)
	testkit.NoErr(t, err)
	return js, kv
}

// waitLive waits until onChange reported exactly want.
func waitLive(t *testing.T, seen chan []string, want []string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case live := <-seen:
			if slices.Equal(live, want) {
				return
			}
		case <-deadline:
			t.Fatalf("members never became %v", want)
		}
	}
}

// The WORKERS bucket lives in memory: a NATS server that restarts comes back without it, and
// the edge makes it again. A member keeps going: it watches again, puts its heartbeat back,
// and sees whoever joins the new bucket. It returns when its context ends.
func TestWatchSurvivesTheBucketGoingAway(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	js, kv := startJS(t, ctx)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	seen := make(chan []string, 64)
	done := make(chan error, 1)
	go func() { done <- New(kv, "w-1", 2*time.Second, log).Run(ctx, func(live []string) { seen <- live }) }()
	waitLive(t, seen, []string{"w-1"})

	testkit.NoErr(t, js.DeleteKeyValue(ctx, schema.BucketWorkers))
	testkit.NoErr(t, schema.EnsureWorkerBuckets(ctx, js, 1, 2*time.Second))
	kv2, err := js.KeyValue(ctx, schema.BucketWorkers)
	testkit.NoErr(t, err)
	go New(kv2, "w-2", 2*time.Second, log).Run(ctx, func([]string) {})
	waitLive(t, seen, []string{"w-1", "w-2"})
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while its context was alive", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v when its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}

// A worker id with dots (systemd's %H-%i) is one token in WORKERS: workers with plain and
// dotted ids see each other, and both agree on every partition's owner.
func TestDottedIDsSeeEachOther(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, kv := startJS(t, ctx)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ids := []string{"plain-2", "box1.example.com-1"}
	seen := make([]chan []string, len(ids))
	groups := make([]*Group, len(ids))
	for i, id := range ids {
		seen[i] = make(chan []string, 16)
		groups[i] = New(kv, id, 2*time.Second, log)
		go groups[i].Run(ctx, func(live []string) { seen[i] <- live })
	}
	want := []string{"box1_example_com-1", "plain-2"}
	for i := range ids {
		deadline := time.After(10 * time.Second)
		for {
			var live []string
			select {
			case live = <-seen[i]:
			case <-deadline:
				t.Fatalf("worker %q never saw both members %v", ids[i], want)
			}
			if slices.Equal(live, want) {
				break
			}
		}
	}
	if groups[1].ID != "box1_example_com-1" {
		t.Fatalf("group id = %q, want the id as one token", groups[1].ID)
	}
	for p := range 16 {
		name := schema.JobConsumer(schema.LaneChat, p)
		if o := Owner(want, name); o != want[0] && o != want[1] {
			t.Fatalf("partition %s owned by %q, not a member", name, o)
		}
	}
}

// A second process on a live worker's id is told, and so is the first.
func TestTwoProcessesOnOneIDAreTold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, kv := startJS(t, ctx)
	var logs [2]testkit.LogBuffer
	seen := make(chan []string, 64)
	go New(kv, "w-1", 2*time.Second, slog.New(slog.NewTextHandler(&logs[0], nil))).Run(ctx, func(live []string) { seen <- live })
	waitLive(t, seen, []string{"w-1"})
	go New(kv, "w-1", 2*time.Second, slog.New(slog.NewTextHandler(&logs[1], nil))).Run(ctx, func([]string) {})
	for i := range logs {
		testkit.WaitFor(t, fmt.Sprintf("process %d told of the other one", i+1), 10*time.Second, func() bool {
			return strings.Contains(logs[i].String(), "another worker runs with this id")
		})
	}
}
