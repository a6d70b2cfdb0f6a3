package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"spookat/edge/internal/admin"
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

// An erasure on a running edge tells the workers, in SITES under edge.erased signed by the
// edge, which conversations' jobs to drop; a second erasure keeps the first's.
func TestErasureListsConversationsForTheWorkers(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "forgetful", Origins: []string{"http://site.test"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@forget.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	ann := edgetest.Login(t, e.Addr, "ann@forget.test", "correct horse battery").NewToken(t)
	convs := map[string]int64{}
	for _, who := range []string{"zoe", "max"} {
		c := edgetest.Dial(t, e.Addr, site.Key, "")
		ack, err := c.SendAck(who, who+" writes")
		testkit.NoErr(t, err)
		c.Send(t, map[string]any{"type": "email", "email": who + "@example.com"})
		convs[who] = *ack.ConversationID
	}
	js, auth := connectWorker(t, e, "reader")
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, schema.BucketSites)
	testkit.NoErr(t, err)
	erased := func() map[int64]int64 {
		v, err := kv.Get(ctx, schema.KeyErased)
		if err != nil {
			return nil
		}
		payload, err := schema.OpenSite(schema.KeyErased, v.Value(), auth.AccountPublicKey())
		testkit.NoErr(t, err)
		var x schema.Erased
		testkit.NoErr(t, json.Unmarshal(payload, &x))
		return x.Conversations
	}
	for _, who := range []string{"zoe", "max"} {
		var res struct {
			WaitingJobs string `json:"waiting_jobs"`
		}
		path := "/sites/" + strconv.FormatInt(site.ID, 10) + "/people?email=" + who + "%40example.com"
		testkit.WaitFor(t, who+"'s email stored, then erased", 5*time.Second, func() bool {
			return ann.Do(t, "DELETE", path, nil, &res) == 200
		})
		if res.WaitingJobs != "dropped by the workers" {
			t.Errorf("%s: waiting jobs %q", who, res.WaitingJobs)
		}
	}
	got := erased()
	if _, ok := got[convs["zoe"]]; !ok || len(got) != 2 {
		t.Fatalf("edge.erased %v; want both conversations %v", got, convs)
	}
}
