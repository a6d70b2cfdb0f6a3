package faults

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
)

// A stop is bounded whatever a target does: with Slack taking posts and never answering and
// visitors sending until their sockets close, SIGTERM ends the edge with exit 0 within the
// 10 s deadline. Nothing acked is lost: every acked message is in the database, and after a
// restart against a Slack that answers, every one of them is posted.
func TestStopIsBoundedWhileSlackHangs(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	hang := newHangingSlack()
	hangSrv := httptest.NewServer(hang)
	defer hangSrv.Close()
	defer close(hang.release)
	data := t.TempDir()
	flags := func(slackURL string) []string {
		return append([]string{"-slack-api", slackURL + "/api/", "-retry-base", "100ms", "-retry-max", "1s"}, edgetest.NoBrakes...)
	}
	p := edgetest.StartProc(t, bin, data, flags(hangSrv.URL)...)
	site := edgetest.AddSite(t, data, &store.Site{Name: "slow slack", Origins: []string{"http://site.test"},
		SlackToken: "xoxb-hang", SlackChannel: "CHANGING1"})

	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for v := range 20 {
		c, err := edgetest.DialVisitor(p.Addr, site.Key, "http://site.test")
		testkit.NoErr(t, err)
		wg.Go(func() {
			defer c.WS.Close()
			for i := 0; ; i++ {
				id := fmt.Sprintf("v%d-%d", v, i)
				if _, err := c.SendAck(id, "text of "+id); err != nil {
					return // the stop closed the socket
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		})
	}
	testkit.WaitFor(t, "Slack to hold posts unanswered and visitors to be acked", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hang.Received() >= 20 && len(acked) >= 500
	})
	took, err := p.Stop(20 * time.Second)
	wg.Wait()
	t.Logf("stop took %s with %d posts unanswered; %d messages acked", took.Round(time.Millisecond), hang.Received(), len(acked))
	if err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Log())
	}
	if took > 10*time.Second+500*time.Millisecond {
		t.Fatalf("stop took %s, over the 10 s deadline\n%s", took, p.Log())
	}

	storedOnce(t, data, acked)

	slack := mock.NewSlack(mock.SlackOptions{})
	srv := httptest.NewServer(slack)
	defer srv.Close()
	edgetest.StartProc(t, bin, data, flags(srv.URL)...)
	testkit.WaitFor(t, "every acked message posted after the restart", 60*time.Second, func() bool {
		return len(missing(slack, acked)) == 0
	})
}
