package inbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/inbox"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

const (
	email    = "ann@shop.test"
	password = "first-password"
)

type env struct {
	e     *edgetest.Edge
	admin *admin.Client
	sites []*store.Site
}

// start runs an edge with two sites and one operator, a member of both.
func start(t *testing.T) *env {
	t.Helper()
	e := edgetest.Start(t, "", server.Config{})
	v := &env{e: e, admin: admin.NewClient(e.DataDir)}
	for _, name := range []string{"one", "two"} {
		v.sites = append(v.sites, edgetest.AddSite(t, e.DataDir, &store.Site{Name: name, Origins: []string{"http://site.test"}}))
	}
	if _, err := v.admin.AddOperator(ctx(t), admin.OperatorRequest{Email: email, Password: password,
		SiteKeys: []string{v.sites[0].Key, v.sites[1].Key}}); err != nil {
		t.Fatal(err)
	}
	return v
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// visit sends one visitor message to a site, so operator sockets watching it get an event.
func (v *env) visit(t *testing.T, site int, text string) {
	t.Helper()
	c := edgetest.Dial(t, v.e.Addr, v.sites[site].Key, "")
	if _, err := c.SendAck("v-1", text); err != nil {
		t.Fatal(err)
	}
}

// wantMessage reads the socket until the message text arrives.
func wantMessage(t *testing.T, s *edgetest.OpSocket, text string) {
	t.Helper()
	for {
		f, err := s.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %q: %v", text, err)
		}
		if m, ok := f["message"].(map[string]any); ok && f["type"] == "message" && m["text"] == text {
			return
		}
	}
}

func wantClosed(t *testing.T, s *edgetest.OpSocket, code int, reason string) {
	t.Helper()
	gotCode, gotReason := s.WaitClosed(t, 10*time.Second)
	if gotCode != code || gotReason != reason {
		t.Fatalf("closed with %d %q, want %d %q", gotCode, gotReason, code, reason)
	}
}

func status(t *testing.T, in *edgetest.Inbox, method, path string, body any) int {
	t.Helper()
	return in.Do(t, method, path, body, nil)
}

func TestLogoutClosesThatSessionsSocket(t *testing.T) {
	v := start(t)
	a := edgetest.Login(t, v.e.Addr, email, password)
	b := edgetest.Login(t, v.e.Addr, email, password)
	wsA, wsB := a.DialInbox(t), b.DialInbox(t)

	if st := status(t, a, http.MethodPost, "/logout", nil); st != http.StatusNoContent {
		t.Fatalf("logout: %d", st)
	}
	wantClosed(t, wsA, inbox.CloseSessionEnded, "session_ended")
	if st := status(t, a, http.MethodGet, "/me", nil); st != http.StatusUnauthorized {
		t.Errorf("GET /me with the logged-out cookie: %d, want 401", st)
	}
	// The other session of the same operator goes on, socket included.
	if st := status(t, b, http.MethodGet, "/me", nil); st != http.StatusOK {
		t.Errorf("GET /me with the other session: %d, want 200", st)
	}
	v.visit(t, 0, "still watched")
	wantMessage(t, wsB, "still watched")
}

func TestDeletingATokenClosesItsSocket(t *testing.T) {
	v := start(t)
	s := edgetest.Login(t, v.e.Addr, email, password)
	keep, drop := s.NewToken(t), s.NewToken(t)
	wsKeep, wsDrop := keep.DialInbox(t), drop.DialInbox(t)
	var list struct {
		Tokens []struct {
			ID int64 `json:"id"`
		} `json:"tokens"`
	}
	if st := s.Do(t, http.MethodGet, "/tokens", nil, &list); st != http.StatusOK || len(list.Tokens) != 2 {
		t.Fatalf("GET /tokens: %d %+v", st, list)
	}
	if st := status(t, s, http.MethodDelete, "/tokens/"+strconv.FormatInt(list.Tokens[1].ID, 10), nil); st != http.StatusNoContent {
		t.Fatalf("DELETE /tokens: %d", st)
	}
	wantClosed(t, wsDrop, inbox.CloseSessionEnded, "session_ended")
	if st := status(t, drop, http.MethodGet, "/me", nil); st != http.StatusUnauthorized {
		t.Errorf("GET /me with the deleted token: %d, want 401", st)
	}
	v.visit(t, 0, "the other token still hears")
	wantMessage(t, wsKeep, "the other token still hears")
}

func TestPasswdRevokesSessionsAndTokens(t *testing.T) {
	v := start(t)
	s := edgetest.Login(t, v.e.Addr, email, password)
	tok := s.NewToken(t)
	wsS, wsT := s.DialInbox(t), tok.DialInbox(t)

	op, err := v.admin.SetPassword(ctx(t), admin.PasswordRequest{Email: strings.ToUpper(email), Password: "second-password"})
	testkit.NoErr(t, err)
	if op.Email != email {
		t.Errorf("SetPassword answered %+v", op)
	}
	wantClosed(t, wsS, inbox.CloseSessionEnded, "session_ended")
	wantClosed(t, wsT, inbox.CloseSessionEnded, "session_ended")
	for _, c := range []struct {
		name string
		in   *edgetest.Inbox
	}{{"old session", s}, {"old API token", tok}} {
		t.Run(c.name, func(t *testing.T) {
			if st := status(t, c.in, http.MethodGet, "/me", nil); st != http.StatusUnauthorized {
				t.Errorf("GET /me: %d, want 401", st)
			}
		})
	}
	if _, st := edgetest.LoginStatus(t, v.e.Addr, email, password); st != http.StatusUnauthorized {
		t.Errorf("login with the old password: %d, want 401", st)
	}
	edgetest.Login(t, v.e.Addr, email, "second-password")

	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			req  admin.PasswordRequest
			want string
		}{
			{admin.PasswordRequest{Email: "nobody@shop.test", Password: "long enough"}, "no operator has the email"},
			{admin.PasswordRequest{Email: email, Password: "short"}, "at least 8 characters"},
		} {
			if _, err := v.admin.SetPassword(ctx(t), c.req); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("SetPassword(%+v) = %v, want an error saying %q", c.req, err, c.want)
			}
		}
	})
}

func TestChangeOwnPasswordKeepsThisSession(t *testing.T) {
	v := start(t)
	here := edgetest.Login(t, v.e.Addr, email, password)
	there := edgetest.Login(t, v.e.Addr, email, password)
	tok := here.NewToken(t)
	wsHere, wsThere := here.DialInbox(t), there.DialInbox(t)

	change := map[string]string{"current_password": password, "new_password": "second-password"}
	noCSRF := &edgetest.Inbox{Addr: here.Addr, Cookie: here.Cookie}
	for _, c := range []struct {
		name string
		in   *edgetest.Inbox
		body any
		want int
	}{
		{"without the CSRF token", noCSRF, change, http.StatusForbidden},
		{"with an API token", tok, change, http.StatusForbidden},
		{"empty body", here, map[string]string{}, http.StatusBadRequest},
		{"new password too short", here, map[string]string{"current_password": password, "new_password": "short"}, http.StatusBadRequest},
		{"wrong current password", here, map[string]string{"current_password": "not-it-at-all", "new_password": "second-password"}, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			if st := status(t, c.in, http.MethodPost, "/me/password", c.body); st != c.want {
				t.Errorf("POST /me/password: %d, want %d", st, c.want)
			}
		})
	}
	// Nothing above changed anything.
	if st := status(t, there, http.MethodGet, "/me", nil); st != http.StatusOK {
		t.Fatalf("the other session after refused changes: %d", st)
	}

	if st := status(t, here, http.MethodPost, "/me/password", change); st != http.StatusNoContent {
		t.Fatalf("POST /me/password: %d, want 204", st)
	}
	wantClosed(t, wsThere, inbox.CloseSessionEnded, "session_ended")
	for _, c := range []struct {
		name string
		in   *edgetest.Inbox
		want int
	}{{"this session", here, http.StatusOK}, {"the other session", there, http.StatusUnauthorized}, {"the API token", tok, http.StatusUnauthorized}} {
		t.Run(c.name, func(t *testing.T) {
			if st := status(t, c.in, http.MethodGet, "/me", nil); st != c.want {
				t.Errorf("GET /me: %d, want %d", st, c.want)
			}
		})
	}
	v.visit(t, 0, "this tab stays live")
	wantMessage(t, wsHere, "this tab stays live")
	// One hash per operator: the new password working means the old one no longer does
	// (logging in with it here too would run into the login limit of 5 a minute per email).
	edgetest.Login(t, v.e.Addr, email, "second-password")
}

func TestRemoveOperator(t *testing.T) {
	v := start(t)
	s := edgetest.Login(t, v.e.Addr, email, password)
	tok := s.NewToken(t)
	ws := s.DialInbox(t)

	if _, err := v.admin.RemoveOperator(ctx(t), admin.OperatorRef{Email: email}); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, ws, inbox.CloseSessionEnded, "session_ended")
	for _, in := range []*edgetest.Inbox{s, tok} {
		if st := status(t, in, http.MethodGet, "/me", nil); st != http.StatusUnauthorized {
			t.Errorf("GET /me after removal: %d, want 401", st)
		}
	}
	if _, st := edgetest.LoginStatus(t, v.e.Addr, email, password); st != http.StatusUnauthorized {
		t.Errorf("login after removal: %d, want 401", st)
	}
	list, err := v.admin.ListOperators(ctx(t))
	if err != nil || len(list) != 0 {
		t.Errorf("operators after removal: %+v, %v", list, err)
	}
	db := edgetest.OpenDB(t, v.e.DataDir)
	for _, table := range []string{"sessions", "api_tokens", "site_members"} {
		if n := edgetest.QueryInt(t, db, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%s rows left: %d", table, n)
		}
	}
	if _, err := v.admin.RemoveOperator(ctx(t), admin.OperatorRef{Email: email}); err == nil || !strings.Contains(err.Error(), "no operator has the email") {
		t.Errorf("removing again: %v", err)
	}
	// The email is free again.
	if _, err := v.admin.AddOperator(ctx(t), admin.OperatorRequest{Email: email, Password: "another-password", SiteKeys: []string{v.sites[0].Key}}); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveMembership(t *testing.T) {
	v := start(t)
	s := edgetest.Login(t, v.e.Addr, email, password)
	tok := s.NewToken(t)
	ws := s.DialInbox(t)
	one, two := v.sites[0].Key, v.sites[1].Key

	res, err := v.admin.RemoveMember(ctx(t), admin.MemberRequest{SiteKey: one, Email: email})
	if err != nil || !res.Changed {
		t.Fatalf("RemoveMember: %+v, %v", res, err)
	}
	wantClosed(t, ws, inbox.CloseSitesChanged, "sites_changed")
	for _, c := range []struct {
		name string
		in   *edgetest.Inbox
		site string
		want int
	}{
		{"session, removed site", s, one, http.StatusForbidden},
		{"token, removed site", tok, one, http.StatusForbidden},
		{"session, kept site", s, two, http.StatusOK},
		{"token, kept site", tok, two, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if st := status(t, c.in, http.MethodGet, "/sites/"+c.site+"/conversations", nil); st != c.want {
				t.Errorf("GET conversations: %d, want %d", st, c.want)
			}
		})
	}
	// A new socket watches the kept site only.
	ws = s.DialInbox(t)
	v.visit(t, 0, "not yours any more")
	v.visit(t, 1, "yours")
	f, err := ws.Next(10 * time.Second)
	testkit.NoErr(t, err)
	if m, _ := f["message"].(map[string]any); m == nil || m["text"] != "yours" {
		t.Fatalf("first event %v, want the kept site's message only", f)
	}

	t.Run("again and back", func(t *testing.T) {
		if res, err := v.admin.RemoveMember(ctx(t), admin.MemberRequest{SiteKey: one, Email: email}); err != nil || res.Changed {
			t.Errorf("removing again: %+v, %v", res, err)
		}
		if res, err := v.admin.AddMember(ctx(t), admin.MemberRequest{SiteKey: one, Email: email}); err != nil || !res.Changed {
			t.Errorf("adding back: %+v, %v", res, err)
		}
		if st := status(t, s, http.MethodGet, "/sites/"+one+"/conversations", nil); st != http.StatusOK {
			t.Errorf("GET conversations after adding back: %d", st)
		}
		if _, err := v.admin.AddMember(ctx(t), admin.MemberRequest{SiteKey: "st_nope", Email: email}); err == nil || !strings.Contains(err.Error(), "no site has the key") {
			t.Errorf("unknown site: %v", err)
		}
	})
}

func TestOperatorAddRefusesExistingEmail(t *testing.T) {
	v := start(t)
	for _, c := range []struct {
		name string
		req  admin.OperatorRequest
		want []string
	}{
		{"same email", admin.OperatorRequest{Email: email, Password: "reset-attempt", SiteKeys: []string{v.sites[0].Key}},
			[]string{"exists already", "edge operator passwd -email " + email, "edge site member add"}},
		{"same email, other case", admin.OperatorRequest{Email: "Ann@Shop.test", Password: "reset-attempt", SiteKeys: []string{v.sites[0].Key}},
			[]string{"exists already"}},
		{"no site", admin.OperatorRequest{Email: "bob@shop.test", Password: "long enough"}, []string{"-site"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.admin.AddOperator(ctx(t), c.req)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// The password was not reset.
	edgetest.Login(t, v.e.Addr, email, password)
}

func TestSettingsRefuseOriginsAndChannelsThatCannotWork(t *testing.T) {
	v := start(t)
	s := edgetest.Login(t, v.e.Addr, email, password)
	path := "/sites/" + v.sites[0].Key + "/settings"
	for _, c := range []struct {
		name string
		body map[string]any
		want int
	}{
		{"origin without scheme", map[string]any{"origins": []string{"shop.example"}}, http.StatusBadRequest},
		{"origin with a path", map[string]any{"origins": []string{"https://shop.example/chat"}}, http.StatusBadRequest},
		{"origin with the default port", map[string]any{"origins": []string{"https://shop.example:443"}}, http.StatusBadRequest},
		{"channel name instead of id", map[string]any{"slack_channel": "#support"}, http.StatusBadRequest},
		{"lowercase channel id", map[string]any{"slack_channel": "c0123abcd"}, http.StatusBadRequest},
		{"good origins", map[string]any{"origins": []string{"https://shop.example/", "http://localhost:3000", "*"}}, http.StatusOK},
		{"good channel", map[string]any{"slack_channel": "C0123ABCD"}, http.StatusOK},
		{"channel removed", map[string]any{"slack_channel": ""}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out map[string]any
			if st := s.Do(t, http.MethodPut, path, c.body, &out); st != c.want {
				t.Fatalf("PUT settings: %d %v, want %d", st, out, c.want)
			}
			if c.want == http.StatusBadRequest && (out["code"] != "invalid" || out["message"] == "") {
				t.Errorf("answer %v, want code invalid and a sentence", out)
			}
		})
	}
	var got inbox.Settings
	s.Do(t, http.MethodGet, path, nil, &got)
	if strings.Join(got.Origins, " ") != "https://shop.example http://localhost:3000 *" {
		t.Errorf("origins stored: %q", got.Origins)
	}
}

// With ?batch=1 events a few milliseconds apart share one frame, a JSON array, in order and
// none lost; without it each event is a frame of its own.
func TestBatchedSocketGroupsEvents(t *testing.T) {
	v := start(t)
	s := edgetest.Login(t, v.e.Addr, email, password)
	batched, plain := s.DialInboxBatched(t), s.DialInbox(t)
	const n = 20
	clients := make([]*edgetest.Client, n)
	for i := range clients {
		clients[i] = edgetest.Dial(t, v.e.Addr, v.sites[i%2].Key, "")
	}
	var wg sync.WaitGroup
	for i, c := range clients { // at once: their commits come within a few ms
		wg.Go(func() {
			if _, err := c.SendAck("b-"+strconv.Itoa(i), "batched "+strconv.Itoa(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen, frames := map[string]bool{}, 0
	for len(seen) < n {
		b, err := batched.NextRaw(10 * time.Second)
		if err != nil {
			t.Fatalf("after %d of %d messages in %d frames: %v", len(seen), n, frames, err)
		}
		frames++
		var events []struct {
			Type    string `json:"type"`
			Message struct {
				Text string `json:"text"`
			} `json:"message"`
		}
		if err := json.Unmarshal(b, &events); err != nil {
			t.Fatalf("a batched frame is not an array of events: %v: %s", err, b)
		}
		for _, e := range events {
			if e.Type == "message" {
				if seen[e.Message.Text] {
					t.Fatalf("%q twice", e.Message.Text)
				}
				seen[e.Message.Text] = true
			}
		}
	}
	if frames >= n {
		t.Errorf("%d messages came in %d frames: none were grouped", n, frames)
	}
	t.Logf("%d messages in %d batched frames", n, frames)
	for range n { // the plain socket: one object a frame
		f, err := plain.Next(10 * time.Second)
		if err != nil || f["type"] != "message" {
			t.Fatalf("plain socket: %v %v", f, err)
		}
	}
}
