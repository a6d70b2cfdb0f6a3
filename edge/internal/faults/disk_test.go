package faults

import (
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
)

// The disk under -data fills up while visitors write (a 64 MiB tmpfs, filled by another
// file): messages are answered `unavailable` (the widget resends them), nothing acked is
// lost, the edge stays up, and once space is freed it acks again and every acked message
// reaches Slack. Needs root to mount the tmpfs; elsewhere it skips, loudly.
func TestDiskFull(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	testkit.NoErr(t, os.Mkdir(data, 0o700))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: cannot mount a tmpfs to fill (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", data).Run() })

	slack := mock.NewSlack(mock.SlackOptions{Latency: 2 * time.Millisecond})
	srv := httptest.NewServer(slack)
	defer srv.Close()
	p := edgetest.StartProc(t, bin, data, append([]string{"-slack-api", srv.URL + "/api/", "-retry-base", "100ms", "-retry-max", "1s",
		"-jobs-max-bytes", "8MiB", "-results-max-bytes", "4MiB", "-dead-max-bytes", "1MiB", "-inbound-max-bytes", "1MiB"}, edgetest.NoBrakes...)...)
	site := edgetest.AddSite(t, data, &store.Site{Name: "full disk", Origins: []string{"http://site.test"},
		SlackToken: "xoxb-disk", SlackChannel: "CDISKFULL"})
	t.Cleanup(func() {
		if t.Failed() {
			log := p.Log()
			t.Logf("edge log:\n%s", log[max(0, len(log)-4000):])
		}
	})

	l := startLoad(t, p.Addr, site.Key, 5, 10*time.Millisecond)
	testkit.WaitFor(t, "posts before the disk fills", 30*time.Second, func() bool { return slack.Count() >= 100 })

	filler := filepath.Join(data, "filler")
	fillDisk(t, filler)
	testkit.WaitFor(t, "visitors answered unavailable", 30*time.Second, func() bool {
		n, _ := l.Unavailable()
		return n >= 20
	})
	ackedFull := l.Acked()
	n, sentence := l.Unavailable()
	t.Logf("disk full: %d answers unavailable (%q), %d acked so far", n, sentence, ackedFull)
	if p.Exited() {
		t.Fatal("the edge exited on a full disk")
	}

	testkit.NoErr(t, os.Remove(filler))
	freedAt := time.Now()
	testkit.WaitFor(t, "acks again once space is freed", 30*time.Second, func() bool { return l.Acked() >= ackedFull+200 })
	t.Logf("acking again %s after the space was freed", time.Since(freedAt).Round(10*time.Millisecond))
	acked, errs := l.Stop()
	if len(errs) > 0 {
		t.Fatalf("visitors failed: %v", errs)
	}
	var left []string
	testkit.WaitFor(t, "every acked message posted", 60*time.Second, func() bool {
		left = missing(slack, acked)
		return len(left) == 0
	})
	t.Logf("%d acked, all posted %s after the space was freed", len(acked), time.Since(freedAt).Round(10*time.Millisecond))
	restarted := strings.Count(p.Log(), "JetStream restarted")
	t.Logf("the edge restarted its JetStream %d times (a stream that failed a write refuses every later one until reloaded)", restarted)
	if _, err := p.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	storedOnce(t, data, acked)
}

// fillDisk writes path until its file system has no room left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	testkit.NoErr(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}
