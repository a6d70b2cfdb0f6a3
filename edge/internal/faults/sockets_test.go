package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// An edge with a low file limit is offered more sockets than it may hold: past its budget
// new ones get 503 busy with a reason, it stays up, the visitors it holds keep their acks,
// and it accepts again as sockets close.
func TestSocketBudget(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	const fds = 600 // the budget is then a quarter: 150
	p := edgetest.StartProc(t, limited(t, bin, fds), t.TempDir(), append([]string{"-worker", "none"}, edgetest.NoBrakes...)...)
	site := edgetest.AddSite(t, p.DataDir, &store.Site{Name: "budget", Origins: []string{"http://site.test"}})
	budget := int(metric(t, p, "spookat_socket_budget"))
	if budget != fds/4 {
		t.Fatalf("budget %d with a limit of %d files, want %d", budget, fds, fds/4)
	}

	var held []*edgetest.Client
	refused := 0
	for i := range budget + 100 {
		c, err := edgetest.DialVisitor(p.Addr, site.Key, "http://site.test")
		if err == nil {
			held = append(held, c)
			continue
		}
		refused++
		if refused == 1 {
			_, resp, derr := edgetest.DialRaw(p.Addr, site.Key, "", "http://site.test")
			if resp == nil {
				t.Fatalf("socket %d: no HTTP answer past the budget: %v / %v", i, err, derr)
			}
			var body schema.HTTPError
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(b, &body) != nil || body.Code != "busy" || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("past the budget: %d %s (Retry-After %q), want 503 busy", resp.StatusCode, b, resp.Header.Get("Retry-After"))
			}
		}
	}
	t.Logf("budget %d: %d sockets held, %d refused", budget, len(held), refused)
	if len(held) > budget || len(held) < budget-5 || refused < 95 {
		t.Fatalf("%d sockets held and %d refused with a budget of %d", len(held), refused, budget)
	}
	if p.Exited() {
		t.Fatalf("the edge exited:\n%s", p.Log())
	}
	if n := metric(t, p, "spookat_socket_refusals_total"); n < float64(refused) {
		t.Fatalf("spookat_socket_refusals_total %v, want at least %d", n, refused)
	}
	for i, c := range held {
		if _, err := c.SendAck(fmt.Sprint("held-", i), "still here"); err != nil {
			t.Fatalf("a held visitor lost its acks: %v", err)
		}
	}
	for _, c := range held[:20] {
		c.WS.Close()
	}
	var again *edgetest.Client
	testkit.WaitFor(t, "a new socket once some closed", 10*time.Second, func() bool {
		c, err := edgetest.DialVisitor(p.Addr, site.Key, "http://site.test")
		again = c
		return err == nil
	})
	if _, err := again.SendAck("after", "room again"); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(held[20:], again) {
		c.WS.Close()
	}
	if d, err := p.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop after %s: %v\n%s", d, err, p.Log())
	}
	db := edgetest.OpenDB(t, p.DataDir)
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != int64(len(held)+1) {
		t.Fatalf("%d messages stored, %d acked", n, len(held)+1)
	}
}
