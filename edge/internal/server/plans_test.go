package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/plans"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema"
	"spookat/schema/testkit"
	"spookat/worker"
)

// Issue 38, point 1 and 4: a site on a plan of two new conversations a month. Two visitors
// start theirs; a third is told, in a sentence, that the chat takes no new conversation,
// and nothing of theirs is stored; the first two go on writing (nothing under way is cut
// off, nothing acked is refused after). The site's operators are told once, in their
// inboxes and by email, however many are refused; the settings show the plan and its use.
// The plan's operators bound the team (invitations count). Paddle's route exists; an edge
// without -plans has none (404).
func TestPlanLimits(t *testing.T) {
	cfg, err := plans.Parse([]byte(`{"default":"tiny","plans":{"tiny":{"conversations_per_month":2,"operators":2,"retention_days_max":30}}}`))
	testkit.NoErr(t, err)
	cfg.PaddleSecrets = []string{"pdl_ntfset_01mock_secret_key_one_0123456789"}
	mail, err := mock.StartSMTP()
	testkit.NoErr(t, err)
	t.Cleanup(func() { mail.Close() })
	wcfg := worker.DefaultConfig()
	wcfg.SMTP.Host, wcfg.SMTP.Port, wcfg.SMTP.TLS, wcfg.SMTP.From = "127.0.0.1", mail.Port, "none", "spookat@tiny.test"
	wcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e := edgetest.Start(t, "", server.Config{Plans: cfg, Worker: &wcfg, InprocWorker: true, RetentionTick: 100 * time.Millisecond})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "tiny", Origins: []string{"http://site.test"}, NotifyEmail: "team@tiny.test"})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@tiny.test", Name: "Ann", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	db := edgetest.OpenDB(t, e.DataDir)

	// Ann has the inbox open: she hears of the limit live, once.
	watch := edgetest.Login(t, e.Addr, "ann@tiny.test", "correct horse battery").DialInbox(t)
	// Five visitors write their first message at once: two get the month's two places,
	// three are refused, though no commit had counted anything when they were admitted.
	var visitors []*edgetest.Client
	arriving := make([]*edgetest.Client, 5)
	for i := range arriving {
		arriving[i] = edgetest.Dial(t, e.Addr, site.Key, "")
	}
	for i, v := range arriving {
		v.Message(t, "c-"+strconv.Itoa(i), "hello")
	}
	for i, v := range arriving {
		switch f := v.Read(t); {
		case f.Type == "ack":
			visitors = append(visitors, v)
		case f.Type != "error" || f.Code != schema.CodePlanLimit:
			t.Fatalf("visitor %d arriving: %+v", i, f)
		}
	}
	if len(visitors) != 2 {
		t.Fatalf("%d of five visitors arriving together started a conversation, want 2", len(visitors))
	}
	for i := range 2 { // new visitors after the two acks
		v := edgetest.Dial(t, e.Addr, site.Key, "")
		v.Message(t, "late", "is anyone there?")
		f := v.Read(t)
		if f.Type != "error" || f.Code != schema.CodePlanLimit || !strings.Contains(f.Message, "not taking new conversations") {
			t.Fatalf("new visitor %d: %+v", i+3, f)
		}
	}
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE site_id = ?`, site.ID); n != 2 {
		t.Fatalf("%d conversations stored, want 2", n)
	}
	for i, v := range visitors {
		if _, err := v.SendAck("more-"+strconv.Itoa(i), "still here"); err != nil {
			t.Fatalf("a conversation under way was cut off: %v", err)
		}
	}
	testkit.WaitFor(t, "the operators told", 10*time.Second, func() bool {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM plan_notices WHERE site_id = ?`, site.ID) == 1
	})
	notices := 0
	for {
		ev, err := watch.Next(2 * time.Second) // what the inbox hears, until it goes quiet
		if err != nil {
			break
		}
		if ev["type"] == "plan" {
			notices++
			if msg, _ := ev["message"].(string); !strings.Contains(msg, "2 new conversations") {
				t.Errorf("the notice says %q", msg)
			}
		}
	}
	if notices != 1 {
		t.Fatalf("the inbox heard %d plan notices, want 1", notices)
	}
	// And one email to the site's notify address (the two new conversations' notifications
	// went there too).
	planMails := func() (n int, body string) {
		for _, m := range mail.Mails() {
			if strings.Contains(string(m.Data), "has had its plan's new conversations") {
				n, body = n+1, string(m.Data)
			}
		}
		return n, body
	}
	testkit.WaitFor(t, "the notice by email", 15*time.Second, func() bool { n, _ := planMails(); return n == 1 })
	if n, body := planMails(); n != 1 || !strings.Contains(body, "team@tiny.test") {
		t.Fatalf("%d plan emails: %s", n, body)
	}

	ann := edgetest.Login(t, e.Addr, "ann@tiny.test", "correct horse battery").NewToken(t)
	siteURL := "/sites/" + strconv.FormatInt(site.ID, 10)
	var settings struct {
		Plan          *plans.Usage
		RetentionDays int `json:"retention_days"`
	}
	// The site was made keeping conversations forever; its plan keeps them 30 days at most,
	// which the plans' pass (with retention's) makes its setting.
	testkit.WaitFor(t, "the plan's retention", 10*time.Second, func() bool {
		return ann.Do(t, "GET", siteURL+"/settings", nil, &settings) == 200 && settings.RetentionDays == 30
	})
	if settings.Plan == nil || settings.Plan.Plan != "tiny" || settings.Plan.Conversations != 2 || settings.Plan.Limits.ConversationsPerMonth != 2 {
		t.Fatalf("settings: %+v", settings.Plan)
	}
	var refused schema.HTTPError
	if code := ann.Do(t, "PUT", siteURL+"/settings", map[string]any{"retention_days": 0}, &refused); code != 400 || !strings.Contains(refused.Message, "30 days at most") {
		t.Fatalf("keep forever on a plan of 30 days: %d %+v", code, refused)
	}
	if code := ann.Do(t, "POST", siteURL+"/invites", map[string]any{"email": "bo@tiny.test", "role": "agent"}, nil); code != http.StatusCreated {
		t.Fatalf("the second seat: %d", code)
	}
	if code := ann.Do(t, "POST", siteURL+"/invites", map[string]any{"email": "cy@tiny.test", "role": "agent"}, &refused); code != http.StatusConflict ||
		refused.Code != schema.CodePlanLimit || !strings.Contains(refused.Message, "room for 2 operators") {
		t.Fatalf("the third seat: %d %+v", code, refused)
	}

	route := func(addr string) int {
		resp, err := http.Post("http://"+addr+"/v1/integrations/paddle/events", "application/json", strings.NewReader(`{}`))
		testkit.NoErr(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := route(e.Addr); code != http.StatusUnauthorized {
		t.Errorf("Paddle's route with -plans, unsigned: %d, want 401", code)
	}
	plain := edgetest.Start(t, "", server.Config{})
	if code := route(plain.Addr); code != http.StatusNotFound {
		t.Errorf("Paddle's route without -plans: %d, want 404", code)
	}
}

// A first message the store fails to write (here a trigger of the test's, as a broken row or
// a full disk would) takes no place under the plan: its visitor is told to send it again,
// the plan's two places go to two others, and the retry, a new conversation still, is
// refused like any third.
func TestPlanPlaceOfAFailedWrite(t *testing.T) {
	cfg, err := plans.Parse([]byte(`{"default":"tiny","plans":{"tiny":{"conversations_per_month":2,"operators":2,"retention_days_max":30}}}`))
	testkit.NoErr(t, err)
	e := edgetest.Start(t, "", server.Config{Plans: cfg})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "tiny", Origins: []string{"http://site.test"}})
	rw, err := store.OpenConn(e.DataDir+"/"+store.FileName, sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	t.Cleanup(func() { rw.Close() })
	testkit.NoErr(t, rw.Exec(`CREATE TRIGGER test_fail BEFORE INSERT ON messages WHEN NEW.text = 'boom'
		BEGIN SELECT RAISE(ABORT, 'the write fails'); END`))
	db := edgetest.OpenDB(t, e.DataDir)
	conversations := func() int64 {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE site_id = ?`, site.ID)
	}

	failed := edgetest.Dial(t, e.Addr, site.Key, "")
	failed.Message(t, "c-1", "boom")
	if f := failed.Read(t); f.Type != "error" || f.Code != schema.CodeUnavailable {
		t.Fatalf("a first message the store failed: %+v, want %s", f, schema.CodeUnavailable)
	}
	if n := conversations(); n != 0 {
		t.Fatalf("%d conversations stored after the failed write, want 0", n)
	}
	for i := range 2 {
		v := edgetest.Dial(t, e.Addr, site.Key, "")
		if _, err := v.SendAck("c-1", "hello"); err != nil {
			t.Fatalf("the plan's place %d after a failed write: %v", i+1, err)
		}
	}
	failed.Message(t, "c-2", "hello again")
	if f := failed.Read(t); f.Type != "error" || f.Code != schema.CodePlanLimit {
		t.Fatalf("the failed visitor's retry on a full plan: %+v, want %s", f, schema.CodePlanLimit)
	}
	if n := conversations(); n != 2 {
		t.Fatalf("%d conversations stored, want 2", n)
	}
}
