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
	"spookat/schema/testkit"
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
	a := newAPI(srv.URL+"/api/", c)
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

// The bot's ✅ on a parent post: adding it twice and removing it twice are both done (a
// retried job does either), and Slack's refusals come back as errors.
func TestReaction(t *testing.T) {
	m := mock.NewSlack(mock.SlackOptions{})
	srv := httptest.NewServer(m)
	defer srv.Close()
	a := newAPI(srv.URL+"/api/", NewHTTP(2))
	ctx, deadline := context.Background(), time.Now().Add(10*time.Second)
	ts, err := a.postMessage(ctx, deadline, "xoxb-1", "C1", "", "parent")
	testkit.NoErr(t, err)
	for _, c := range []struct {
		name string
		on   bool
		want bool // the reaction is there after
	}{{"add", true, true}, {"add again", true, true}, {"remove", false, false}, {"remove again", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			testkit.NoErr(t, a.reaction(ctx, deadline, "xoxb-1", "C1", ts, doneReaction, c.on))
			if got := m.Reacted("C1", ts, doneReaction); got != c.want {
				t.Fatalf("reacted %v, want %v", got, c.want)
			}
		})
	}
	if n := len(m.Reactions()); n != 2 {
		t.Fatalf("the mock recorded %d reactions, want one add and one remove", n)
	}
	var ae *apiError
	if err := a.reaction(ctx, deadline, "xoxb-1", "C1", "1.000001", doneReaction, true); !errors.As(err, &ae) || ae.code != "message_not_found" || !cosmetic(err) {
		t.Fatalf("a post that is not there: %v, want message_not_found (cosmetic)", err)
	}
	if err := a.reaction(ctx, deadline, "xoxb-revoked", "C1", ts, doneReaction, true); !errors.As(err, &ae) || ae.code != "invalid_auth" || cosmetic(err) {
		t.Fatalf("a revoked token: %v, want invalid_auth (not cosmetic)", err)
	}
}
