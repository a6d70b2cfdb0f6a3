package edgetest

import (
	"path/filepath"
	"testing"
)

// WorkerProc is bin/worker running as a subprocess.
type WorkerProc struct {
	*process
	ID string // its -worker-id
}

// StartWorker starts bin/worker with -worker-id id, no metrics server, and the extra flags
// (-nats-url, -slack-api, …). Its output goes to dir/worker-<id>.log. It is killed at the end
// of the test if still running.
func StartWorker(t testing.TB, bin, dir, id string, extra ...string) *WorkerProc {
	t.Helper()
	args := append([]string{"-worker-id", id, "-metrics-addr", ""}, extra...)
	return &WorkerProc{ID: id, process: startProcess(t, "worker "+id, filepath.Join(dir, "worker-"+id+".log"), bin, args...)}
}
