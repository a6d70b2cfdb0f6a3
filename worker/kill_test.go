package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
	"spookat/worker"
)

// workerProc is bin/worker as a subprocess, killed with SIGKILL as a crash is.
type workerProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string // its log file
}

// logged says whether the worker's log holds s.
func (p *workerProc) logged(s string) bool {
	b, _ := os.ReadFile(p.log)
	return strings.Contains(string(b), s)
}

// startWorkerProc runs bin/worker with an identity of its own on e's NATS and Slack mock.
func (e *env) startWorkerProc(t *testing.T, bin, id string, cfg worker.Config, extra ...string) *workerProc {
	t.Helper()
	ident, err := e.auth.Issue(schema.RoleWorker, id)
	testkit.NoErr(t, err)
	dir := t.TempDir()
	creds := filepath.Join(dir, id+".creds")
	testkit.NoErr(t, os.WriteFile(creds, ident.Creds(), 0o600))
	logf, err := os.Create(filepath.Join(dir, id+".log"))
	testkit.NoErr(t, err)
	cmd := exec.Command(bin, "-nats-url", e.url, "-nats-creds", creds, "-metrics-addr", "", "-slack-api", cfg.SlackAPI,
		// The queue's timers (ack wait, pinned TTL, member TTL) are the edge's: Provision set them.
		"-allow-private-targets", "-pull-expiry", cfg.PullExpiry.String(),
		"-retry-base", cfg.RetryBase.String(), "-retry-max", cfg.RetryMax.String())
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	testkit.NoErr(t, cmd.Start())
	p := &workerProc{cmd: cmd, done: make(chan struct{}), log: logf.Name()}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("worker %s's log:\n%s", id, b[max(0, len(b)-3000):])
		}
	})
	return p
}

func (p *workerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Issue 30: workers SIGKILLed at random moments while 20 conversations are written, a new
// worker started a moment after each kill (its partitions' pins and the dead one's jobs still
// out), with a pinned TTL and a member TTL below the ack wait. Every conversation reaches
// Slack in order: a message in flight at a kill may arrive twice, never after a later one.
func TestOrderAfterKills(t *testing.T) {
	bin := os.Getenv("SPOOKAT_BIN")
	if bin == "" {
		t.Skip("SKIPPED: SPOOKAT_BIN is not set; run `make test`, which builds bin/worker first")
	}
	bin = filepath.Join(bin, "worker")
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SPOOKAT_KILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Logf("seed %d (SPOOKAT_KILL_SEED replays it)", seed)

	const convs, perConv, sitesN, kills = 20, 400, 4, 5
	e := newEnv(t, mock.SlackOptions{Latency: 25 * time.Millisecond})
	e.batched = true
	for s := int64(1); s <= sitesN; s++ {
		e.putSite(schema.SiteDelivery{SiteID: s, SlackToken: "xoxb-" + strconv.FormatInt(s, 10), SlackChannel: "C" + strconv.FormatInt(s, 10)})
	}
	cfg := e.config()
	cfg.MemberTTL, cfg.PinnedTTL, cfg.AckWait = time.Second, 1500*time.Millisecond, 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	testkit.NoErr(t, worker.Provision(ctx, e.js, 1, cfg))
	cancel()

	var mu sync.Mutex
	current := e.startWorkerProc(t, bin, "k0", cfg)
	published := make(chan struct{})
	go func() { // a window every 40 ms, one message per conversation, as visitors typing
		defer close(published)
		msgID := int64(0)
		for k := range perConv {
			var jobs []schema.Job
			for c := int64(1); c <= convs; c++ {
				msgID++
				jobs = append(jobs, job(schema.TargetSlack, c%sitesN+1, c, msgID, k == 0, marker(c, k)))
			}
			e.publish(jobs...)
			time.Sleep(40 * time.Millisecond)
		}
	}()
	for i := 1; i <= kills; i++ {
		time.Sleep(time.Duration(2000+rng.IntN(2000)) * time.Millisecond) // long enough to own partitions and post
		mu.Lock()
		current.kill()
		gap := time.Duration(100 + rng.IntN(900))
		t.Logf("kill %d after %d posts; the next worker in %d ms", i, countMarkers(e.slack.Posts()), gap)
		time.Sleep(gap * time.Millisecond)
		current = e.startWorkerProc(t, bin, fmt.Sprintf("k%d", i), cfg)
		mu.Unlock()
	}
	<-published
	e.waitForMarkers(t, 90*time.Second, convs, perConv)
	dups := 0
	for conv, seq := range sequences(e.slack.Posts()) {
		if n := checkOrder(t, conv, seq, perConv); !t.Failed() {
			dups += n
		} else {
			t.Logf("conversation %d in full: %v", conv, seq)
			break
		}
	}
	t.Logf("%d posts, %d repeated after %d kills", len(e.slack.Posts()), dups, kills)
}
