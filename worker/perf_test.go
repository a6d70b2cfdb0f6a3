package worker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
	"spookat/worker"
)

// TestPerfSlack measures a real bin/worker process against the 50 ms Slack mock: deliveries/s
// and the worker's CPU per delivery from /proc (the mock and NATS live in this test process, so
// they are not counted). Run with SPOOKAT_PERF=1 (N=jobs, WORKERS=processes, WORKER_ARGS=extra
// flags such as "-chat-inflight 128", WORKER_CPUS=cpus to pin the workers with taskset (run the
// test itself under taskset on the other CPUs), CPUPROFILE=file for the first worker's CPU
// profile, PPROF=addr to serve its /debug/pprof, WORKER_BIN=path to measure another build).
func TestPerfSlack(t *testing.T) {
	if os.Getenv("SPOOKAT_PERF") == "" {
		t.Skip("set SPOOKAT_PERF=1 to measure")
	}
	n := envInt("N", 30000)
	workers := envInt("WORKERS", 1)
	convs := envInt("CONVS", 1500)
	bin := os.Getenv("WORKER_BIN") // another build, for before/after comparisons
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "worker")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/worker").CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	e := newEnv(t, mock.SlackOptions{Latency: 50 * time.Millisecond})
	for s := int64(1); s <= 100; s++ {
		e.putSite(schema.SiteDelivery{SiteID: s, SlackToken: "xoxb-" + strconv.FormatInt(s, 10), SlackChannel: "C" + strconv.FormatInt(s, 10)})
	}
	// The consumers are the edge's to create; a worker process waits for them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	testkit.NoErr(t, worker.Provision(ctx, e.js, 1, e.config()))
	cancel()
	var jobs []schema.Job
	for i := 0; i < n; i++ {
		c := int64(i%convs + 1)
		jobs = append(jobs, job(schema.TargetSlack, c%100+1, c, int64(i+1), i < convs, marker(c, i/convs)))
	}
	for i := 0; i < len(jobs); i += 5000 {
		e.publish(jobs[i:min(i+5000, len(jobs))]...)
	}
	var procs []*exec.Cmd
	for i := range workers {
		id, err := e.auth.Issue(schema.RoleWorker, "perf-"+strconv.Itoa(i))
		testkit.NoErr(t, err)
		creds := filepath.Join(t.TempDir(), "worker.creds")
		testkit.NoErr(t, os.WriteFile(creds, id.Creds(), 0o600))
		args := []string{"-nats-url", e.url, "-nats-creds", creds, "-metrics-addr", "", "-slack-api", e.slackTS.URL + "/api/"}
		args = append(args, strings.Fields(os.Getenv("WORKER_ARGS"))...)
		if a := os.Getenv("PPROF"); a != "" && i == 0 {
			args = append(args, "-pprof", a)
		}
		if p := os.Getenv("CPUPROFILE"); p != "" && i == 0 {
			args = append(args, "-cpuprofile", p)
		}
		cmd := exec.Command(bin, args...)
		if cpus := os.Getenv("WORKER_CPUS"); cpus != "" {
			// Its own core, as in production: Go then runs it with GOMAXPROCS 1 (from the affinity).
			cmd = exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
		}
		cmd.Stderr = os.Stderr
		testkit.NoErr(t, cmd.Start())
		procs = append(procs, cmd)
	}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(os.Interrupt)
			_ = p.Wait()
		}
	}()
	// Measure the middle 60 % of the posts: start-up (connect, consumers, partitions settling
	// between workers) and the tail (fewer conversations left than slots) are not steady state.
	from, to := n/5, n*4/5
	testkit.WaitFor(t, "a fifth of the posts", 60*time.Second, func() bool { return e.slack.Count() >= from })
	start, c0, s0, n0 := time.Now(), cpu(t, procs), selfCPU(t), e.slack.Count()
	testkit.WaitFor(t, "four fifths of the posts", 300*time.Second, func() bool { return e.slack.Count() >= to })
	el, c1, s1, n1 := time.Since(start), cpu(t, procs), selfCPU(t), e.slack.Count()
	done := n1 - n0
	t.Logf("%d workers: %d deliveries in %s = %.0f/s; worker CPU %.1f µs per delivery (%.2f cores)",
		workers, done, el.Round(time.Millisecond), float64(done)/el.Seconds(),
		float64((c1-c0).Microseconds())/float64(done), (c1-c0).Seconds()/el.Seconds())
	t.Logf("this process (NATS server, Slack mock, results reader): %.2f cores", (s1-s0).Seconds()/el.Seconds())
	testkit.WaitFor(t, "every post", 300*time.Second, func() bool { return e.slack.Count() >= n })
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func selfCPU(t *testing.T) time.Duration {
	return cpuOf(t, os.Getpid())
}

func cpuOf(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	testkit.NoErr(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// cpu sums user+system time of the processes from /proc/<pid>/stat (clock ticks of 10 ms).
func cpu(t *testing.T, procs []*exec.Cmd) time.Duration {
	var d time.Duration
	for _, p := range procs {
		d += cpuOf(t, p.Process.Pid)
	}
	return d
}
