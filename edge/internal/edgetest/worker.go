package edgetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// WorkerProc is bin/worker running as a subprocess.
type WorkerProc struct {
	Cmd     *exec.Cmd
	ID      string // its -worker-id
	LogPath string // stderr and stdout
	exited  chan struct{}
	exitErr error
}

// StartWorker starts bin/worker with -worker-id id, no metrics server, and the extra flags
// (-nats-url, -slack-api, …). Its output goes to dir/worker-<id>.log. It is killed at the end
// of the test if still running.
func StartWorker(t testing.TB, bin, dir, id string, extra ...string) *WorkerProc {
	t.Helper()
	w := &WorkerProc{ID: id, LogPath: filepath.Join(dir, "worker-"+id+".log"), exited: make(chan struct{})}
	args := append([]string{"-worker-id", id, "-metrics-addr", ""}, extra...)
	w.Cmd = exec.Command(bin, args...)
	logf, err := os.Create(w.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	w.Cmd.Stderr, w.Cmd.Stdout = logf, logf
	if err := w.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.exitErr = w.Cmd.Wait()
		logf.Close()
		close(w.exited)
	}()
	t.Cleanup(w.Kill)
	return w
}

// Exited reports whether the process is gone.
func (w *WorkerProc) Exited() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (w *WorkerProc) Kill() {
	_ = w.Cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

// Stop sends SIGTERM and returns the exit error (nil: exit 0) and how long the stop took.
func (w *WorkerProc) Stop(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = w.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
		return time.Since(start), w.exitErr
	case <-time.After(timeout):
		w.Kill()
		return time.Since(start), fmt.Errorf("worker %s did not exit within %s after SIGTERM", w.ID, timeout)
	}
}

// Log returns what the process wrote so far (for failure messages).
func (w *WorkerProc) Log() string {
	b, _ := os.ReadFile(w.LogPath)
	return string(b)
}
