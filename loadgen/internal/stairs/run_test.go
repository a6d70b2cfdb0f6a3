package stairs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"spookat/schema"
	"spookat/schema/testkit"
)

// fakeEdge speaks the widget protocol: hello, an ack per message, and an error for every
// 50th message. It serves /metrics with the saved counter.
type fakeEdge struct {
	saved, refused atomic.Int64
	origins        atomic.Value
}

func (f *fakeEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		fmt.Fprintf(w, "# TYPE spookat_messages_saved_total counter\nspookat_messages_saved_total %d\n", f.saved.Load())
		fmt.Fprintf(w, "go_sched_latencies_seconds_bucket{le=\"1e-05\"} %d\ngo_sched_latencies_seconds_bucket{le=\"0.001\"} %d\ngo_sched_latencies_seconds_bucket{le=\"+Inf\"} %d\n", f.saved.Load(), f.saved.Load()+10, f.saved.Load()+10)
		return
	case "/v1/widget/ws":
	default:
		http.NotFound(w, r)
		return
	}
	if r.URL.Query().Get("site") == "" {
		http.Error(w, `{"code":"not_found"}`, http.StatusNotFound)
		return
	}
	f.origins.Store(r.Header.Get("Origin"))
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	c.WriteJSON(schema.Hello{Type: schema.FrameHello, Visitor: "v"})
	n := 0
	for {
		var fr schema.ClientFrame
		if err := c.ReadJSON(&fr); err != nil {
			return
		}
		if fr.Type == schema.FramePage { // the window's page: no answer, as the edge
			continue
		}
		n++
		if n%50 == 0 {
			f.refused.Add(1)
			c.WriteJSON(schema.Error{Type: schema.FrameError, ClientID: fr.ClientID, Code: schema.CodeRateLimited, Message: "slow down", RetryAfterMS: 100})
			continue
		}
		id := f.saved.Add(1)
		c.WriteJSON(schema.Ack{Type: schema.FrameAck, ClientID: fr.ClientID, MessageID: id, ConversationID: 1, CreatedAt: time.Now()})
	}
}

func TestRunAgainstFakeEdge(t *testing.T) {
	fe := &fakeEdge{}
	srv := httptest.NewServer(fe)
	defer srv.Close()
	keys := []string{"a", "b", "c"}
	rep, err := Run(context.Background(), Config{
		Page:    true,
		EdgeURL: srv.URL,
		Keys:    keys,
		Sockets: 20,
		Stairs:  []float64{300, 900},
		Step:    1500 * time.Millisecond,
		Warmup:  300 * time.Millisecond,
		Drain:   3 * time.Second,
		EdgePID: os.Getpid(), // this test process plays the edge
	})
	testkit.NoErr(t, err)
	if got := fe.origins.Load(); got != "http://loadgen.test" {
		t.Fatalf("origin %v", got)
	}
	if rep.SocketsOpen != 20 || len(rep.Stairs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Acked != fe.saved.Load() || rep.Errors[schema.CodeRateLimited] != fe.refused.Load() {
		t.Fatalf("acked %d errors %v; edge saved %d refused %d", rep.Acked, rep.Errors, fe.saved.Load(), fe.refused.Load())
	}
	if rep.Sent != rep.Acked+rep.Errors[schema.CodeRateLimited] || rep.Unacked != 0 {
		t.Fatalf("sent %d acked %d errors %v unacked %d", rep.Sent, rep.Acked, rep.Errors, rep.Unacked)
	}
	if rep.SavedDelta == nil || int64(*rep.SavedDelta) != rep.Acked {
		t.Fatalf("metrics delta %v", rep.SavedDelta)
	}
	for i, s := range rep.Stairs {
		// 1.5 s at the rate, ±1 tick per sender.
		want := s.TargetRate * 1.5
		if math.Abs(float64(s.Sent)-want) > 10 {
			t.Errorf("stair %d sent %d, want ≈%.0f", i, s.Sent, want)
		}
		if math.Abs(s.AckedRate-s.TargetRate*0.98) > s.TargetRate*0.1 {
			t.Errorf("stair %d acked rate %.0f, target %.0f", i, s.AckedRate, s.TargetRate)
		}
		if s.Latency.Count == 0 || s.Latency.P99 <= 0 || s.Latency.P99 > 100 {
			t.Errorf("stair %d latency %+v", i, s.Latency)
		}
		if len(s.Procs) != 1 || s.Procs[0].CPUPercent == nil || s.Procs[0].RSSPeakMB <= 0 {
			t.Errorf("stair %d procs %+v", i, s.Procs)
		}
		if s.Loadgen.CPUMicrosPerMsg == nil {
			t.Errorf("stair %d: no loadgen CPU", i)
		}
		if s.SchedP99MS == nil {
			t.Errorf("stair %d: no sched p99", i)
		}
	}
	dir := t.TempDir()
	testkit.NoErr(t, rep.WriteJSON(filepath.Join(dir, "r.json")))
	var back Report
	b, _ := os.ReadFile(filepath.Join(dir, "r.json"))
	if err := json.Unmarshal(b, &back); err != nil || back.Acked != rep.Acked {
		t.Fatalf("json round trip: %v", err)
	}
	md := rep.Markdown()
	if !strings.Contains(md, "| 900 |") {
		t.Fatalf("markdown:\n%s", md)
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	t.Logf("\n%s", sb.String())
}

func TestParseSlackCount(t *testing.T) {
	for body, want := range map[string]int64{
		`17`:                          17,
		`{"posts":3,"channels":2}`:    3,
		`{"slack":{"messages":9}}`:    9,
		`{"delivered":12,"errors":1}`: 12,
		`{"slack":{"count":4},"x":1}`: 4,
		`{"slack_posts":10,"slack_lines":14,"slack_429":0}`: 14,
	} {
		got, err := parseSlackCount([]byte(body))
		if err != nil || got != want {
			t.Errorf("%s: got %d %v", body, got, err)
		}
	}
	if _, err := parseSlackCount([]byte(`{"nothing":1}`)); err == nil {
		t.Error("no count: want error")
	}
}

// Refusals by the edge's brakes come with what to do about them; other errors do not.
func TestBrakeHint(t *testing.T) {
	var sb strings.Builder
	(&Report{Errors: map[string]int64{"rate_limited": 40, "braked": 2}}).WriteTable(&sb)
	if !strings.Contains(sb.String(), "42 messages were refused by the edge's brakes") || !strings.Contains(sb.String(), "-conn-msg-rate 0") {
		t.Errorf("table without the brakes' hint:\n%s", sb.String())
	}
	if h := BrakeHint(map[string]int64{"unavailable": 3}); h != "" {
		t.Errorf("hint for errors that are not brakes: %q", h)
	}
}
