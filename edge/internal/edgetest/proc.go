package edgetest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
	"spookat/schema/freeport"
)

// Bin returns the path of a built binary from $SPOOKAT_BIN (set by `make test`). Without it
// the test is skipped, loudly: these tests need the real binaries.
func Bin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("SPOOKAT_BIN")
	if dir == "" {
		t.Skipf("SKIPPED: SPOOKAT_BIN is not set; run `make test`, which builds bin/%s first", name)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("SPOOKAT_BIN is set but %s is missing: %v", path, err)
	}
	return path
}

// FreePort returns a loopback address with a port free right now (freeport.Addr: away from
// the ports other tests' connections are given).
func FreePort(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// NoBrakes are the edge flags that lift every brake, for tests that load the edge on
// purpose (the brakes have their own tests).
var NoBrakes = []string{"-conn-msg-rate", "0", "-site-msg-rate", "0", "-ip-conv-rate", "0",
	"-ip-socket-rate", "0", "-flood-threshold", "0"}

// Proc is bin/edge running as a subprocess.
type Proc struct {
	*process
	Addr        string
	MetricsAddr string
	NATSAddr    string
	DataDir     string
}

// StartProc starts bin/edge on dataDir with fresh ports plus extra flags, and waits for
// /readyz. Its stderr goes to dataDir/edge-<n>.log.
func StartProc(t testing.TB, bin, dataDir string, extra ...string) *Proc {
	t.Helper()
	return StartProcLogs(t, bin, dataDir, dataDir, extra...)
}

// StartProcLogs is StartProc with the logs in logDir (a power-cut test keeps them off the
// disk it cuts).
func StartProcLogs(t testing.TB, bin, dataDir, logDir string, extra ...string) *Proc {
	t.Helper()
	p := &Proc{Addr: FreePort(t), MetricsAddr: FreePort(t), NATSAddr: FreePort(t), DataDir: dataDir}
	args := append([]string{"-data", dataDir, "-addr", p.Addr, "-metrics-addr", p.MetricsAddr, "-nats-listen", p.NATSAddr, "-nats-monitor", ""}, extra...)
	logs, _ := filepath.Glob(filepath.Join(logDir, "edge-*.log"))
	p.process = startProcess(t, "edge", filepath.Join(logDir, fmt.Sprintf("edge-%d.log", len(logs))), bin, args...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + p.Addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("edge exited before ready: %v\n%s", p.exitErr, p.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("edge not ready within 30s")
		}
	}
}

// Admin runs an admin subcommand of bin/edge on the data directory and returns its stdout.
func Admin(t testing.TB, bin, dataDir string, args ...string) string {
	t.Helper()
	full := append(append([]string{}, args...), "-data", dataDir)
	out, err := exec.Command(bin, full...).Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("edge %s: %v %s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// Creds issues NATS credentials with `edge creds` (role worker, ops or edge; id for a worker)
// into the data directory and returns the file's path.
func Creds(t testing.TB, bin, dataDir, role, id string) string {
	t.Helper()
	name := role
	args := []string{"creds", role}
	if id != "" {
		name += "-" + id
		args = append(args, "-id", id)
	}
	path := filepath.Join(dataDir, name+".creds")
	Admin(t, bin, dataDir, append(args, "-out", path)...)
	return path
}

// ConnectOps connects to NATS with fresh ops credentials (read-only: reports, stream gets),
// as an SRE's nats CLI does, and returns JetStream through the ops account's imports
// (schema.OpsAPIPrefix). It is closed at the end of the test.
func ConnectOps(t testing.TB, bin, dataDir, url string, extra ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserCredentials(Creds(t, bin, dataDir, "ops", "")),
		nats.MaxReconnects(-1)}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, schema.OpsAPIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
