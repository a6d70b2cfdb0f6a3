package discord

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"spookat/schema"
	"spookat/worker/egress"
)

// TestErrorsHoldNoToken: whatever Discord (or something standing in for it) answers, the
// error that goes to RESULTS, DEAD, the inbox and logs holds a status, Discord's code and a
// short reason, never the webhook's path (its token) nor the answer's text.
func TestErrorsHoldNoToken(t *testing.T) {
	const token = "T0KEN-s3cr3t"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := `{"message": "Unknown Webhook ` + r.URL.String() + `", "code": 10015}`
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/webhooks/1/"):
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(echo))
		case strings.HasPrefix(r.URL.Path, "/api/webhooks/2/"):
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("forbidden: " + r.URL.String()))
		case strings.HasPrefix(r.URL.Path, "/api/webhooks/3/"):
			http.Redirect(w, r, "/api/webhooks/1/"+token, http.StatusTemporaryRedirect)
		case strings.HasPrefix(r.URL.Path, "/api/webhooks/4/"):
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			_, _ = conn.Write([]byte("INFO " + r.URL.String() + "\r\n"))
			conn.Close()
		}
	}))
	defer srv.Close()
	s := New(egress.Client(nil, 5*time.Second, true), srv.URL+"/api", nil, true)
	for _, tc := range []struct {
		hook string
		want string
	}{
		{"1", "discord: http 404 (code 10015)"},
		{"2", "discord: http 403"},
		{"3", "discord: http 307: redirects are not followed"},
		{"4", "discord: the server does not speak HTTP"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			site := &schema.SiteDelivery{SiteID: 1, DiscordWebhook: "https://discord.com/api/webhooks/" + tc.hook + "/" + token}
			job := &schema.Job{ID: "m1.discord", SiteID: 1, ConversationID: 1, MessageID: 1, Text: "hi", CreatedAt: time.Now()}
			out := s.Send(context.Background(), time.Now().Add(5*time.Second), site, []*schema.Job{job})
			if out.Err == nil || out.Err.Error() != tc.want {
				t.Fatalf("error %v, want %q", out.Err, tc.want)
			}
			if strings.Contains(out.Err.Error(), token) || strings.Contains(out.Err.Error(), "webhooks") {
				t.Fatalf("error %q holds the webhook URL", out.Err)
			}
		})
	}
}

func TestLineMarksAPossibleRepeat(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  schema.Job
		want string
	}{
		{"message", schema.Job{Name: "Ann", Text: "hi"}, "Ann: hi"},
		{"repeat", schema.Job{Name: "Ann", Text: "hi", MaybeRepeat: true}, "Ann: hi *(" + schema.RepeatMark + ")*"},
		{"status repeat", schema.Job{Kind: schema.KindClosed, Text: "Closed by Ann", MaybeRepeat: true}, "✅ *Closed by Ann* *(" + schema.RepeatMark + ")*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := line(&tc.job); got != tc.want {
				t.Errorf("line = %q, want %q", got, tc.want)
			}
		})
	}
}
