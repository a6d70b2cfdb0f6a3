package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
	"spookat/worker/internal/sites"
)

// A worker takes a SITES value only when the edge signed it for that key, and never an
// older one than it holds: what anyone else wrote into the bucket (see schema/access.go) is
// ignored, the last good settings stay.
func TestSitesTakeOnlySignedValues(t *testing.T) {
	e := newEnv(t, mock.SlackOptions{})
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "C1", WebhookURL: "https://site1.example/hook"})
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, schema.BucketSites)
	testkit.NoErr(t, err)
	old, err := kv.Get(ctx, schema.SiteKey(1))
	testkit.NoErr(t, err)
	c, err := sites.Open(ctx, e.js, e.auth.AccountPublicKey(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	testkit.NoErr(t, err)
	want := func(what string) {
		t.Helper()
		d, err := c.Get(ctx, 1)
		if err != nil || d == nil || d.WebhookURL != "https://site1.example/hook" {
			t.Fatalf("%s: site 1 = %+v, %v", what, d, err)
		}
	}
	want("signed")
	put := func(key string, val []byte) {
		t.Helper()
		if _, err := kv.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	evil, _ := json.Marshal(schema.SiteDelivery{Signed: time.Now().Add(time.Hour).UnixNano(), SiteID: 1, WebhookURL: "https://evil.example"})
	put(schema.SiteKey(1), evil) // unsigned
	put(schema.SiteKey(1), append([]byte("AAAA."), evil...))
	other := e.auth.SignSite(schema.SiteKey(2), evil) // signed, but for another key
	put(schema.SiteKey(1), other)
	// A newer good value, then the old good one written back.
	e.putSite(schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb-1", SlackChannel: "C1", WebhookURL: "https://site1.example/hook"})
	put(schema.SiteKey(1), old.Value())
	// A value the cache can take, for a site it has not seen, marks when the ones before are in.
	e.putSite(schema.SiteDelivery{SiteID: 9, WebhookURL: "https://site9.example"})
	testkit.WaitFor(t, "site 9 in the cache", 5*time.Second, func() bool { return c.Peek(9) != nil })
	want("after forged and old values")
}
