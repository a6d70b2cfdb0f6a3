package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// followParent stops the edge when its parent process is being stopped (-follow-parent, which
// `make run` passes). make stays the edge's parent: it passes SIGTERM on to its child, but on
// SIGINT, SIGHUP or SIGQUIT sent to it alone (a supervisor, `kill -INT <make's pid>`) it only
// waits for the child, which would never hear of it. While make handles such a signal it has
// set it back to its default action, and /proc/<ppid>/status shows that (SigCgt): the edge
// reads it twice a second and stops when a stop signal its parent caught is no longer caught,
// or when the parent is gone (the edge was handed to another). Linux only; elsewhere it does
// nothing.
func followParent(ctx context.Context, stop context.CancelFunc, log *slog.Logger) {
	const watched = 1<<(syscall.SIGHUP-1) | 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGQUIT-1) | 1<<(syscall.SIGTERM-1)
	parent := os.Getppid()
	caught, ok := caughtSignals(parent)
	if !ok {
		return
	}
	caught &= watched
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, ok := caughtSignals(parent)
		if os.Getppid() != parent || !ok {
			log.Info("the parent process is gone; stopping", "parent", parent)
			stop()
			return
		}
		if now&caught != caught {
			log.Info("the parent process is stopping (a stop signal sent to it); stopping", "parent", parent)
			stop()
			return
		}
	}
}

// caughtSignals is the mask of signals process pid catches (bit n-1 for signal n).
func caughtSignals(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return m, err == nil
		}
	}
	return 0, false
}
