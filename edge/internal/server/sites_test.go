package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// A worker may read THREADS and write it; NATS then lets it name SITES as the reply subject
// of a read, and JetStream writes its answer there (see schema/access.go). The edge puts its
// own signed value back, and workers would not have taken the other one.
func TestEdgePutsForeignSitesValuesBack(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "hooked", Origins: []string{"*"},
		WebhookURL: "https://site.example/hook", WebhookSecret: "whsec_c2VjcmV0"})
	js, auth := connectWorker(t, e, "forger")
	nc := js.Conn()
	ctx := context.Background()
	sites, err := js.KeyValue(ctx, schema.BucketSites)
	testkit.NoErr(t, err)
	key := schema.SiteKey(site.ID)
	good, err := sites.Get(ctx, key)
	testkit.NoErr(t, err)
	if _, err := schema.OpenSite(key, good.Value(), auth.AccountPublicKey()); err != nil {
		t.Fatalf("the edge's own value: %v", err)
	}
	threads, err := js.KeyValue(ctx, schema.BucketThreads)
	testkit.NoErr(t, err)
	if _, err := threads.Put(ctx, "slack.9.9", []byte(`{"site_id":1,"webhook_url":"https://evil.example"}`)); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("$JS.API.DIRECT.GET.KV_THREADS.$KV.THREADS.slack.9.9")
	m.Reply = "$KV." + schema.BucketSites + "." + key
	testkit.NoErr(t, nc.PublishMsg(m))
	testkit.WaitFor(t, "the forged value in SITES", 5*time.Second, func() bool {
		e, err := sites.Get(ctx, key)
		return err == nil && e.Revision() > good.Revision()
	})
	testkit.WaitFor(t, "the edge's value back", 5*time.Second, func() bool {
		e, err := sites.Get(ctx, key)
		return err == nil && bytes.Equal(e.Value(), good.Value())
	})
}
