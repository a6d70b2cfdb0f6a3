// Package proc starts and stops the processes loadgen measures (edge, worker, mocks): free
// ports, readiness checks, CPU pinning with taskset, and SIGTERM with a deadline.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"spookat/schema/freeport"
)

// FreePort returns a TCP port on 127.0.0.1 nobody listens on right now (freeport.Addr).
func FreePort() (int, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return 0, err
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// FreeAddr is FreePort as "127.0.0.1:port".
func FreeAddr() (string, error) { return freeport.Addr() }

// Proc is a started process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
	once sync.Once
}

// Start runs bin with args, its output going to out (nil: discarded). With cpus set (e.g.
// "0") and taskset on the PATH it runs pinned to those CPUs; pinned says whether it was.
func Start(name string, out io.Writer, cpus string, bin string, args ...string) (p *Proc, pinned bool, err error) {
	path, argv := bin, args
	if cpus != "" {
		if ts, err := exec.LookPath("taskset"); err == nil {
			path, argv = ts, append([]string{"-c", cpus, bin}, args...)
			pinned = true
		}
	}
	cmd := exec.Command(path, argv...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start %s: %w", name, err)
	}
	p = &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, pinned, nil
}

// PID is the process id (taskset execs the program, so it is the program's own pid).
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Err is the exit status once Exited is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// Stop sends SIGTERM and waits up to grace for the exit, then kills. It returns the exit
// error (nil for exit 0) or an error saying it had to be killed.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		p.Cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.Name, grace)
	}
}

// WaitHTTP polls url until it answers 200, the process exits, or timeout passes.
func (p *Proc) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %s answered: %v", p.Name, url, p.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := c.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = errors.New(resp.Status)
		} else {
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not ready within %v: %v", p.Name, url, timeout, last)
}

// LogFile creates path for a process's output.
func LogFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
}
