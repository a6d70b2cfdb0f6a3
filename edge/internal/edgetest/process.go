package edgetest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is a started binary whose output goes to a log file; Proc and WorkerProc share it.
type process struct {
	Cmd     *exec.Cmd
	LogPath string // stdout and stderr
	name    string
	exited  chan struct{} // closed when the process is gone
	exitErr error
}

// startProcess starts bin with args, logging to logPath. It is killed at the end of the test
// if still running.
func startProcess(t testing.TB, name, logPath, bin string, args ...string) *process {
	t.Helper()
	p := &process{Cmd: exec.Command(bin, args...), LogPath: logPath, name: name, exited: make(chan struct{})}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.Cmd.Stderr, p.Cmd.Stdout = logf, logf
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = p.Cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(p.Kill)
	return p
}

// Log returns what the process wrote so far (for failure messages).
func (p *process) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Exited reports whether the process is gone.
func (p *process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM and returns the exit error (nil: exit 0) and how long the stop took;
// past timeout it kills the process and says so.
func (p *process) Stop(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return time.Since(start), p.exitErr
	case <-time.After(timeout):
		p.Kill()
		return time.Since(start), fmt.Errorf("%s did not exit within %s after SIGTERM", p.name, timeout)
	}
}

// procFile is one of the process's files in Linux's /proc.
func (p *process) procFile(name string) ([]byte, error) {
	return os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.Cmd.Process.Pid, name))
}

// Environ is the process's environment as the kernel holds it (Linux's /proc), which an
// exec within the process replaces.
func (p *process) Environ() ([]string, error) {
	b, err := p.procFile("environ")
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}

// Comm is the process's name as ps and pgrep show it (Linux's /proc).
func (p *process) Comm() (string, error) {
	b, err := p.procFile("comm")
	return strings.TrimSpace(string(b)), err
}

// RSS is the process's resident memory in bytes, from /proc (0 when it cannot be read).
func (p *process) RSS() int64 {
	b, err := p.procFile("status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// ExitErr is how the process ended (nil: exit 0); only meaningful once Exited.
func (p *process) ExitErr() error {
	<-p.exited
	return p.exitErr
}

// Cmd is another program a test runs beside the edge (litestream).
type Cmd struct{ *process }

// StartCmd starts bin with args, its output in logDir/<name>.log; it is killed at the end of
// the test if still running.
func StartCmd(t testing.TB, name, logDir, bin string, args ...string) *Cmd {
	t.Helper()
	return &Cmd{startProcess(t, name, logDir+"/"+name+".log", bin, args...)}
}
