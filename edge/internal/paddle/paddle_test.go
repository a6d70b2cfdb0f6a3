package paddle_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/paddle"
	"spookat/edge/internal/plans"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
)

const (
	secret    = "pdl_ntfset_01mock_secret_key_one_0123456789"
	rotated   = "pdl_ntfset_01mock_secret_key_two_0123456789"
	plansJSON = `{"default":"free","past_due_grace_days":3,
		"plans":{"free":{"operators":2,"conversations_per_month":5,"retention_days_max":30},
		         "pro":{"sites":2,"operators":10,"conversations_per_month":1000,"paddle_prices":["pri_01pro"]}}}`
)

type env struct {
	app   *fiber.App
	st    *store.Store
	book  *plans.Book
	sites []*store.Site
	now   time.Time
	pd    *mock.Paddle
}

func setup(t *testing.T, secrets ...string) *env {
	t.Helper()
	cfg, err := plans.Parse([]byte(plansJSON))
	testkit.NoErr(t, err)
	cfg.PaddleSecrets = secrets
	st, err := store.Open(t.TempDir(), store.Options{Readers: 1})
	testkit.NoErr(t, err)
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, now: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return e.now }
	for _, name := range []string{"a", "b", "c"} {
		s := &store.Site{Name: name, Origins: []string{"*"}, RetentionDays: 0}
		testkit.NoErr(t, st.Write(context.Background(), func(tx *store.Tx) error { return tx.AddSite(s) }))
		e.sites = append(e.sites, s)
	}
	e.book = plans.NewBook(cfg, clock)
	testkit.NoErr(t, e.book.Load(context.Background(), st))
	e.app = fiber.New()
	(&paddle.Handler{Store: st, Sites: sites.New(e.sites, brakes.New(brakes.Defaults(), nil)), Book: e.book,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock}).Register(e.app)
	e.pd = &mock.Paddle{Secrets: []string{secret}, Clock: clock}
	return e
}

func (e *env) send(t *testing.T, req *http.Request) (int, paddle.Outcome) {
	t.Helper()
	resp, err := e.app.Test(req, 10_000)
	testkit.NoErr(t, err)
	defer resp.Body.Close()
	var out paddle.Outcome
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

const url = "/v1/integrations/paddle/events"

// The signature, as Paddle documents it: valid; the body changed after signing; signed too
// long ago or too far ahead (5 s, Paddle's SDKs' tolerance); under a key no longer ours; no
// header; during a rotation, a header with two h1 of which ours is the second.
func TestSignature(t *testing.T) {
	e := setup(t, secret)
	ev := e.pd.Event("subscription.created", e.now, mock.PaddleSubscription{ID: "sub_01a", Status: "active", SiteKeys: []string{e.sites[0].Key}, Prices: []string{"pri_01pro"}})
	tampered := append([]byte(nil), ev.Body...)
	tampered[len(tampered)-2] = ' '
	for _, c := range []struct {
		name   string
		body   []byte
		header string
		want   int
	}{
		{"tampered body", tampered, mock.Sign(ev.Body, e.now, secret), 401},
		{"stale", ev.Body, mock.Sign(ev.Body, e.now.Add(-6*time.Second), secret), 401},
		{"from the future", ev.Body, mock.Sign(ev.Body, e.now.Add(6*time.Second), secret), 401},
		{"another key", ev.Body, mock.Sign(ev.Body, e.now, rotated), 401},
		{"no header", ev.Body, "", 401},
		{"not ts;h1", ev.Body, "sig=abc", 401},
		{"valid, rotating: ours second", ev.Body, mock.Sign(ev.Body, e.now, rotated, secret), 200},
		{"a replay of it", ev.Body, mock.Sign(ev.Body, e.now, secret), 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := e.send(t, e.pd.RequestSigned(url, c.body, c.header))
			if code != c.want {
				t.Fatalf("answered %d, want %d", code, c.want)
			}
			if c.name == "a replay of it" && (out.Applied || out.Why != "duplicate") {
				t.Fatalf("a replay: %+v", out)
			}
		})
	}
	if p := e.book.Plan(e.sites[0].ID); p.Name != "pro" {
		t.Fatalf("after the valid event: plan %s", p.Name)
	}
	// Two keys of our own while rotating: the new one is taken too.
	e2 := setup(t, secret, rotated)
	ev2 := e2.pd.Event("subscription.created", e2.now, mock.PaddleSubscription{ID: "sub_01b", Status: "active", SiteKeys: []string{e2.sites[0].Key}, Prices: []string{"pri_01pro"}})
	if code, _ := e2.send(t, e2.pd.RequestSigned(url, ev2.Body, mock.Sign(ev2.Body, e2.now, rotated))); code != 200 {
		t.Fatalf("signed with the second key: %d", code)
	}
}

// Each subscription event moves the plan: created (pro), past due (pro for the grace, then
// free), resumed, paused (free), updated to active again, canceled (free); an older event
// arriving late and a repeat change nothing; a subscription names at most its plan's sites.
func TestSubscriptionMovesThePlan(t *testing.T) {
	e := setup(t, secret)
	a, b, c := e.sites[0], e.sites[1], e.sites[2]
	sub := mock.PaddleSubscription{ID: "sub_01x", Status: "active", CustomerID: "ctm_01", SiteKeys: []string{a.Key, b.Key, c.Key, "st_unknown"}, Prices: []string{"pri_01pro"}}
	t0 := e.now
	send := func(ev mock.PaddleEvent) paddle.Outcome {
		t.Helper()
		code, out := e.send(t, e.pd.Request(url, ev))
		if code != 200 {
			t.Fatalf("%s: %d", ev.Type, code)
		}
		return out
	}
	plan := func(s *store.Site) string { return e.book.Plan(s.ID).Name }

	created := e.pd.Event("subscription.created", t0, sub)
	out := send(created)
	if !out.Applied || plan(a) != "pro" || plan(b) != "pro" || plan(c) != "free" || len(out.Default) != 2 {
		t.Fatalf("created: %+v; plans %s %s %s (pro covers 2 sites)", out, plan(a), plan(b), plan(c))
	}
	if o := send(created); o.Applied || o.Why != "duplicate" {
		t.Fatalf("the same event twice: %+v", o)
	}

	sub.Status = "past_due"
	send(e.pd.Event("subscription.past_due", t0.Add(time.Hour), sub))
	if plan(a) != "pro" {
		t.Fatal("past due: the plan is kept for the grace")
	}
	e.now = t0.Add(time.Hour + 3*24*time.Hour + time.Minute)
	if plan(a) != "free" {
		t.Fatal("past due beyond the grace: the default plan")
	}
	// An event older than the last applied one, arriving late: nothing changes.
	sub.Status = "active"
	if o := send(e.pd.Event("subscription.updated", t0.Add(30*time.Minute), sub)); o.Applied || o.Why == "" {
		t.Fatalf("a stale event: %+v", o)
	}
	if plan(a) != "free" {
		t.Fatal("a stale event moved the plan")
	}
	send(e.pd.Event("subscription.resumed", e.now, sub))
	if plan(a) != "pro" {
		t.Fatal("resumed: pro again")
	}
	sub.Status = "paused"
	e.now = e.now.Add(time.Minute)
	send(e.pd.Event("subscription.paused", e.now, sub))
	if plan(a) != "free" {
		t.Fatal("paused: free")
	}
	sub.Status, sub.SiteKeys = "active", []string{b.Key} // a no longer on it
	e.now = e.now.Add(time.Minute)
	send(e.pd.Event("subscription.updated", e.now, sub))
	if plan(a) != "free" || plan(b) != "pro" {
		t.Fatalf("updated to name b alone: %s %s", plan(a), plan(b))
	}
	sub.Status = "canceled"
	e.now = e.now.Add(time.Minute)
	send(e.pd.Event("subscription.canceled", e.now, sub))
	if plan(b) != "free" {
		t.Fatal("canceled: free")
	}
	// Recorded: a new Book reads the same plans back; each change is in the site's audit log,
	// by paddle; a's retention (forever) was shortened to free's 30 days.
	fresh := plans.NewBook(e.book.Config, func() time.Time { return e.now })
	testkit.NoErr(t, fresh.Load(context.Background(), e.st))
	if fresh.Plan(b.ID).Name != "free" || fresh.Plan(a.ID).Name != "free" {
		t.Fatal("not recorded")
	}
	log, err := e.st.AuditLog(context.Background(), b.ID, store.AuditQuery{Action: store.AuditPlanChanged})
	testkit.NoErr(t, err)
	if len(log) < 3 || log[0].Actor != "paddle" || log[0].Detail["plan"] != "free" {
		t.Fatalf("b's audit: %+v", log)
	}
	row, err := e.st.SiteByID(context.Background(), a.ID)
	testkit.NoErr(t, err)
	if row.RetentionDays != 30 {
		t.Fatalf("a keeps conversations %d days under free (30 at most)", row.RetentionDays)
	}
}
