package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/schema/testkit"
)

// makeRun is `make run` with its listeners on free ports.
type makeRun struct {
	cmd    *exec.Cmd
	banner string // what it printed up to the NATS monitor line
}

// startMakeRun runs the Makefile's run target (without its build: the binaries are built)
// and returns once the edge printed its demo banner.
func startMakeRun(t *testing.T, bin string, vars ...string) *makeRun {
	t.Helper()
	root, err := filepath.Abs("../../..")
	testkit.NoErr(t, err)
	args := append([]string{"-s", "-C", root, "-o", "build", "run", "BIN=" + filepath.Dir(bin)}, vars...)
	cmd := exec.Command("make", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a supervisor's child, not our terminal's
	out, err := cmd.StdoutPipe()
	testkit.NoErr(t, err)
	logf, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	testkit.NoErr(t, err)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Skipf("SKIPPED: make is not runnable here: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	var b strings.Builder
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				stderr, _ := os.ReadFile(logf.Name())
				t.Fatalf("make run ended before its banner:\n%s\n%s", b.String(), stderr)
			}
			b.WriteString(l + "\n")
			if strings.Contains(l, "NATS monitor") {
				go func() {
					for range lines {
					}
				}()
				return &makeRun{cmd: cmd, banner: b.String()}
			}
		case <-timeout:
			t.Fatalf("make run printed no banner within 60s:\n%s", b.String())
		}
	}
}

// `make run` prints only addresses that answer, every listener has a make variable (two
// edges run side by side), and a SIGTERM to make stops the edge.
func TestMakeRunPrintsWhatItBinds(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("SKIPPED: no make on this machine")
	}
	ports := func() []string {
		return []string{"DATA=" + t.TempDir(), "ADDR=" + edgetest.FreePort(t), "METRICS_ADDR=" + edgetest.FreePort(t),
			"NATS_ADDR=" + edgetest.FreePort(t), "NATS_MONITOR=" + edgetest.FreePort(t)}
	}
	first, second := startMakeRun(t, bin, ports()...), startMakeRun(t, bin, ports()...)
	for i, r := range []*makeRun{first, second} {
		urls := regexp.MustCompile(`(https?|wss?|nats)://[^\s,]+`).FindAllString(r.banner, -1)
		if len(urls) < 7 {
			t.Fatalf("edge %d: banner names %d URLs, want the widget, inbox, websocket, health, metrics, NATS and its monitor:\n%s", i, len(urls), r.banner)
		}
		for _, u := range urls {
			switch {
			case strings.HasPrefix(u, "nats://"):
				c, err := net.DialTimeout("tcp", strings.TrimPrefix(u, "nats://"), 2*time.Second)
				if err != nil {
					t.Errorf("edge %d: printed %s does not answer: %v", i, u, err)
					continue
				}
				c.Close()
				if !strings.Contains(r.banner, "--server "+u) {
					t.Errorf("edge %d: the nats command does not name its server %s:\n%s", i, u, r.banner)
				}
			case strings.HasPrefix(u, "ws"):
				u = strings.Replace(u, "ws", "http", 1) // a GET without upgrade: 400, but it answers
				fallthrough
			default:
				resp, err := http.Get(u)
				if err != nil {
					t.Errorf("edge %d: printed %s does not answer: %v", i, u, err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode >= 500 || resp.StatusCode == http.StatusNotFound {
					t.Errorf("edge %d: printed %s answers %d", i, u, resp.StatusCode)
				}
			}
		}
	}
	// A supervisor stops `make run` with a signal to make's PID alone: make passes SIGTERM on,
	// and waits for its child on SIGINT (the edge follows its parent).
	for _, c := range []struct {
		r   *makeRun
		sig syscall.Signal
	}{{first, syscall.SIGTERM}, {second, syscall.SIGINT}} {
		edgePID := childOf(t, c.r.cmd.Process.Pid)
		testkit.NoErr(t, c.r.cmd.Process.Signal(c.sig))
		exited := make(chan error, 1)
		go func() { exited <- c.r.cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Fatalf("make run did not return within 20s of %v", c.sig)
		}
		testkit.WaitFor(t, "the edge to exit", 5*time.Second, func() bool {
			return syscall.Kill(edgePID, 0) != nil
		})
	}
}

// childOf is the PID of pid's only child.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	p := strconv.Itoa(pid)
	b, err := os.ReadFile(filepath.Join("/proc", p, "task", p, "children"))
	testkit.NoErr(t, err)
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("make has children %q, want the edge alone", f)
	}
	child, err := strconv.Atoi(f[0])
	testkit.NoErr(t, err)
	return child
}
