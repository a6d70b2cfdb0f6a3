package faults

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
)

// limited writes a wrapper that starts bin with at most fds open files (soft and hard), as
// a box whose `ulimit -n` is that low would. exec keeps the pid, so signals reach the edge.
func limited(t *testing.T, bin string, fds int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge-limited")
	script := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %s \"$@\"\n", fds, bin)
	testkit.NoErr(t, os.WriteFile(path, []byte(script), 0o700))
	return path
}

// hangingSlack is a Slack Web API that takes every request and never answers until released.
type hangingSlack struct {
	mu       sync.Mutex
	received int
	release  chan struct{}
}

func newHangingSlack() *hangingSlack { return &hangingSlack{release: make(chan struct{})} }

func (h *hangingSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.received++
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	http.Error(w, "released", http.StatusServiceUnavailable)
}

func (h *hangingSlack) Received() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.received
}

// metric reads a series of a subprocess edge, failing the test when it is missing.
func metric(t *testing.T, p *edgetest.Proc, series string) float64 {
	t.Helper()
	v, ok := edgetest.Metric(p.MetricsAddr, series)
	if !ok {
		t.Fatalf("%s missing from %s/metrics", series, p.MetricsAddr)
	}
	return v
}

// load is visitors sending "text of <client id>" one after another, each waiting for its
// ack (and pace between messages), until stopped or their socket fails. An `unavailable`
// answer is what the widget resends: the same client id after retry_after_ms. It records
// every acked client id, the unavailable answers and the errors that ended visitors.
type load struct {
	mu          sync.Mutex
	acked       map[string]bool
	unavailable int
	lastRefusal string
	lat         []latency
	errs        []error
	stop        chan struct{}
	wg          sync.WaitGroup
}

func startLoad(t *testing.T, addr, siteKey string, visitors int, pace time.Duration) *load {
	t.Helper()
	l := &load{acked: map[string]bool{}, stop: make(chan struct{})}
	for v := range visitors {
		c, err := edgetest.DialVisitor(addr, siteKey, "http://site.test")
		testkit.NoErr(t, err)
		l.wg.Go(func() {
			defer c.WS.Close()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := fmt.Sprintf("v%d-%d", v, i)
				sent := time.Now()
				f, err := c.SendAck(id, "text of "+id)
				for err != nil && f.Type == "error" && f.Code == "unavailable" && f.ClientID == id {
					l.mu.Lock()
					l.unavailable++
					l.lastRefusal = f.Message
					l.mu.Unlock()
					select {
					case <-l.stop:
						return
					case <-time.After(time.Duration(f.RetryAfterMS) * time.Millisecond):
					}
					f, err = c.SendAck(id, "text of "+id)
				}
				if err != nil {
					l.mu.Lock()
					l.errs = append(l.errs, err)
					l.mu.Unlock()
					return
				}
				l.mu.Lock()
				l.acked[id] = true
				l.lat = append(l.lat, latency{sent, time.Since(sent)})
				l.mu.Unlock()
				if pace > 0 {
					select {
					case <-l.stop:
						return
					case <-time.After(pace):
					}
				}
			}
		})
	}
	return l
}

// Acked is how many messages were acked so far.
func (l *load) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// latency is how long one message took from its (first) send to its ack.
type latency struct {
	sent time.Time
	took time.Duration
}

// P99 is the 99th percentile of the ack latency of the messages first sent in [from, to),
// and how many there were.
func (l *load) P99(from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	var in []time.Duration
	for _, x := range l.lat {
		if !x.sent.Before(from) && x.sent.Before(to) {
			in = append(in, x.took)
		}
	}
	l.mu.Unlock()
	if len(in) == 0 {
		return 0, 0
	}
	slices.Sort(in)
	return in[min(len(in)-1, len(in)*99/100)], len(in)
}

// Unavailable is how many times a message was answered `unavailable`, and the last sentence.
func (l *load) Unavailable() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unavailable, l.lastRefusal
}

// Stop ends the load and returns the acked client ids and the visitors' errors.
func (l *load) Stop() (map[string]bool, []error) {
	close(l.stop)
	l.wg.Wait()
	return l.acked, l.errs
}

var postedID = regexp.MustCompile(`text of (v\d+-\d+)`)

// missing lists the acked messages the Slack mock has no post of (merged posts hold several).
func missing(slack *mock.Slack, acked map[string]bool) []string {
	seen := map[string]bool{}
	for _, post := range slack.Posts() {
		for _, m := range postedID.FindAllStringSubmatch(post.Text, -1) {
			seen[m[1]] = true
		}
	}
	var out []string
	for id := range acked {
		if !seen[id] {
			out = append(out, id)
		}
	}
	return out
}

// storedOnce fails the test unless every acked client id is in the edge's database once.
func storedOnce(t *testing.T, data string, acked map[string]bool) {
	t.Helper()
	db := edgetest.OpenDB(t, data)
	defer db.Close()
	st, _, err := db.Prepare(`SELECT count(*) FROM messages WHERE client_id = ?`)
	testkit.NoErr(t, err)
	defer st.Close()
	for id := range acked {
		st.BindText(1, id)
		st.Step()
		n := st.ColumnInt(0)
		st.Reset()
		if n != 1 {
			t.Fatalf("acked message %s stored %d times", id, n)
		}
	}
}
