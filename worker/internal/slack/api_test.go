package slack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"spookat/loadgen/mock"
)

// Over TLS, as with the real Slack: the post arrives with its thread and its text intact
// (quotes, new lines, markup characters, emoji) and its ts comes back; then Slack's refusals
// come back as the errors the sender classifies: an error code in a 200, a 429 with its
// Retry-After.
func TestPostMessageOverTLS(t *testing.T) {
	m := mock.NewSlack(mock.SlackOptions{Realistic: true, Rate: 0.01, Burst: 2})
	srv := httptest.NewTLSServer(m)
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := NewHTTP(4)
	c.TLSConfig = &tls.Config{RootCAs: roots}
	a := newAPI(srv.URL+"/api/chat.postMessage", c)
	ctx, deadline := context.Background(), time.Now().Add(10*time.Second)

	text := "*Ann:* \"quoted\" <b>&amp;</b>\nsecond line \u2028 😀 é"
	ts, err := a.postMessage(ctx, deadline, "xoxb-1", "C1", "1700000000.000100", text)
	if err != nil || ts == "" {
		t.Fatalf("post over TLS: ts %q, err %v", ts, err)
	}
	posts := m.Posts()
	if len(posts) != 1 || posts[0].Text != text || posts[0].ThreadTS != "1700000000.000100" || posts[0].Channel != "C1" ||
		posts[0].Token != "xoxb-1" || posts[0].TS != ts {
		t.Fatalf("the mock got %+v", posts)
	}

	var ae *apiError
	if _, err := a.postMessage(ctx, deadline, "xoxb-1", "CNOTFOUND1", "", "x"); !errors.As(err, &ae) || ae.code != "channel_not_found" {
		t.Fatalf("unknown channel: %v", err)
	}
	if _, err := a.postMessage(ctx, deadline, "xoxb-1", "C1", "", "second of the burst"); err != nil {
		t.Fatal(err)
	}
	var rl *rateLimitedError
	if _, err := a.postMessage(ctx, deadline, "xoxb-1", "C1", "", "past the burst"); !errors.As(err, &rl) || rl.after < time.Second {
		t.Fatalf("past the channel's burst: %v, want a 429 with Retry-After", err)
	}
}
