package webhook

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"spookat/schema"
	"spookat/worker/egress"
)

// rebinding is a client whose every name resolves to addr, as a DNS name under a site's
// control can at send time, with the worker's dial-time check (egress.Control) in place.
func rebinding(addr string) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second, Control: egress.Control}
	c := egress.Client(nil, 5*time.Second, false)
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	return c
}

func TestSendRefusesAndDoesNotFollow(t *testing.T) {
	var hits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/latest/meta-data/", http.StatusFound)
	}))
	defer redirect.Close()
	loopback := strings.TrimPrefix(elsewhere.URL, "http://")

	for _, tc := range []struct {
		name      string
		s         *Sender
		url       string
		want      string
		permanent bool
	}{
		// The name passes the save-time check; it is the address it resolves to that is refused.
		{"rebinding name", New(rebinding(loopback), false), "https://hooks.example.com/in?token=SECRET", "webhook: refused: address 127.0.0.1 is loopback", true},
		{"http", New(egress.Client(nil, 5*time.Second, false), false), elsewhere.URL + "/in?token=SECRET", "webhook: refused: the URL must start with https://", true},
		// The lab switch lets the loopback test server in; the 302 is still not followed.
		{"redirect", New(egress.Client(nil, 5*time.Second, true), true), redirect.URL + "/in?token=SECRET", "webhook: http 302: redirects are not followed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := &schema.SiteDelivery{SiteID: 1, WebhookURL: tc.url, WebhookSecret: "whsec_c2VjcmV0"}
			job := &schema.Job{ID: "m1.webhook", SiteID: 1, ConversationID: 1, MessageID: 1, Text: "hi", CreatedAt: time.Now()}
			out := tc.s.Send(context.Background(), time.Now().Add(5*time.Second), site, []*schema.Job{job})
			if out.Err == nil || out.Err.Error() != tc.want || out.Permanent != tc.permanent {
				t.Fatalf("outcome %+v, want %q (permanent %v)", out, tc.want, tc.permanent)
			}
			if strings.Contains(out.Err.Error(), "SECRET") || strings.Contains(out.Err.Error(), "/in") {
				t.Fatalf("error %q holds the URL", out.Err)
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("%d requests reached the loopback server", n)
			}
		})
	}
}

// A status change is its own event type; a visitor's message that reopened the conversation
// is a message.created that says so.
func TestEventTypes(t *testing.T) {
	got := make(chan Event, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			t.Error(err)
		}
		got <- ev
	}))
	defer srv.Close()
	s := New(egress.Client(nil, 5*time.Second, true), true)
	site := &schema.SiteDelivery{SiteID: 1, WebhookURL: srv.URL + "/in", WebhookSecret: "whsec_c2VjcmV0"}
	for _, tc := range []struct {
		name     string
		job      schema.Job
		typ      string
		reopened bool
	}{
		{"message", schema.Job{Author: schema.AuthorVisitor, Text: "hi"}, "message.created", false},
		{"closed", schema.Job{Author: schema.AuthorSystem, Kind: schema.KindClosed, Text: "Closed by Ann"}, "conversation.closed", false},
		{"reopened", schema.Job{Author: schema.AuthorSystem, Kind: schema.KindReopened, Text: "Reopened by Ann"}, "conversation.reopened", false},
		{"reopening message", schema.Job{Author: schema.AuthorVisitor, Text: "back", Reopened: true}, "message.created", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.ID, j.SiteID, j.ConversationID, j.MessageID, j.CreatedAt = "m1.webhook", 1, 1, 1, time.Now()
			if out := s.Send(context.Background(), time.Now().Add(5*time.Second), site, []*schema.Job{&j}); !out.OK() {
				t.Fatal(out.Err)
			}
			ev := <-got
			if ev.Type != tc.typ || ev.Data.Reopened != tc.reopened || ev.Data.Kind != j.Kind || ev.Data.Text != j.Text {
				t.Fatalf("event %+v, want type %s, reopened %v", ev, tc.typ, tc.reopened)
			}
		})
	}
}
