package inbox

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// The audit log over the API: a login, a failed login, a settings change (its field names,
// never the values), a token made, an export; filtered by action; an agent may not read it.
func TestAuditLog(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	login := func(password string) int {
		req := httptest.NewRequest("POST", "/v1/api/login", strings.NewReader(`{"email":"ann@shop.example","password":"`+password+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := app.Test(req, 10_000)
		testkit.NoErr(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	if login("wrong one") != http.StatusUnauthorized || login("correct horse") != http.StatusOK {
		t.Fatal("logins")
	}
	siteURL := "/v1/api/sites/" + strconv.FormatInt(site.ID, 10)
	if code := apiCall(t, app, token, "PUT", siteURL+"/settings", `{"name":"Shop two","webhook_url":"","identity_secret":"a-secret-of-the-site-0123456789"}`, nil); code != 200 {
		t.Fatalf("settings: %d", code)
	}
	if code := apiCall(t, app, token, "POST", "/v1/api/tokens", `{"name":"ci"}`, nil); code != 201 {
		t.Fatalf("token: %d", code)
	}
	var log struct{ Entries []store.AuditEntry }
	if code := apiCall(t, app, token, "GET", siteURL+"/audit", "", &log); code != 200 {
		t.Fatalf("audit: %d", code)
	}
	var actions []string
	for _, e := range log.Entries {
		actions = append(actions, string(e.Action))
		if e.Action == store.AuditSettingsChanged {
			fields, _ := e.Detail["fields"].([]any)
			if len(fields) != 3 || fields[0] != "identity_secret" || e.Actor != "ann@shop.example" || e.Address == "" {
				t.Errorf("settings entry %+v", e)
			}
		}
	}
	if strings.Join(actions, ",") != "token_created,settings_changed,login,login_failed" {
		t.Errorf("actions, newest first: %v", actions)
	}
	raw := ""
	testkit.NoErr(t, st.Read(context.Background(), func(q store.Querier) error {
		s, err := q.Stmt(`SELECT group_concat(detail, ' ') FROM audit`)
		if err != nil {
			return err
		}
		if s.Step() {
			raw = s.ColumnText(0)
		}
		return s.Err()
	}))
	if strings.Contains(raw, "a-secret-of-the-site") || strings.Contains(raw, "Shop two") {
		t.Errorf("the log holds a value: %s", raw)
	}
	if code := apiCall(t, app, token, "GET", siteURL+"/audit?action=login", "", &log); code != 200 || len(log.Entries) != 1 {
		t.Errorf("filtered by action: %d %+v", code, log.Entries)
	}
	_, agentToken := addMember(t, st, site, "agent@shop.example", store.RoleAgent)
	if code := apiCall(t, app, agentToken, "GET", siteURL+"/audit", "", nil); code != http.StatusForbidden {
		t.Errorf("an agent reads the log: %d", code)
	}
}

// Every action the inbox audits writes its entry, in the action's own commit: the entry names
// the operator (or the email a failed login tried) and the client's address; an action that
// changes nothing (a refused role change, a token already gone) writes none.
func TestAuditEveryAction(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	ctx := context.Background()
	siteURL := "/v1/api/sites/" + strconv.FormatInt(site.ID, 10)
	public := func(method, path, body string, out any, header ...string) *http.Response {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := app.Test(req, 10_000)
		testkit.NoErr(t, err)
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		resp.Body.Close()
		return resp
	}
	count := func() int {
		n := 0
		testkit.NoErr(t, st.Read(ctx, func(q store.Querier) error {
			s, err := q.Stmt(`SELECT count(*) FROM audit`)
			if err != nil {
				return err
			}
			if s.Step() {
				n = s.ColumnInt(0)
			}
			return s.Err()
		}))
		return n
	}
	// A visitor with an email, to export and erase.
	ch := make(chan store.MessageResult, 1)
	testkit.NoErr(t, st.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte("zoe"), Author: schema.AuthorVisitor, Text: "hello", ClientID: "1",
		Done: func(r store.MessageResult) { ch <- r }}))
	r := <-ch
	testkit.NoErr(t, st.Write(ctx, func(tx *store.Tx) error {
		return tx.Exec(`UPDATE visitors SET email = 'zoe@example.com' WHERE id = ?`, r.VisitorID)
	}))

	var session struct {
		CSRF   string `json:"csrf_token"`
		cookie string
	}
	var tokenID, inviteID int64
	var inviteLink string
	var joined int64
	steps := []struct {
		name   string
		do     func() int
		code   int
		action store.AuditAction // "": no entry
		actor  string
		check  func(e store.AuditEntry) bool
	}{
		{"a wrong password", func() int {
			return public("POST", "/v1/api/login", `{"email":"ann@shop.example","password":"wrong"}`, nil).StatusCode
		}, http.StatusUnauthorized, store.AuditLoginFailed, "ann@shop.example", nil},
		{"a login", func() int {
			resp := public("POST", "/v1/api/login", `{"email":"ann@shop.example","password":"correct horse"}`, &session)
			for _, c := range resp.Cookies() {
				if c.Name == CookieName {
					session.cookie = c.Value
				}
			}
			return resp.StatusCode
		}, http.StatusOK, store.AuditLogin, "ann@shop.example", nil},
		{"a settings change", func() int {
			return apiCall(t, app, token, "PUT", siteURL+"/settings", `{"notify_email":"team@shop.example"}`, nil)
		}, http.StatusOK, store.AuditSettingsChanged, "ann@shop.example", func(e store.AuditEntry) bool {
			f, _ := e.Detail["fields"].([]any)
			return len(f) == 1 && f[0] == "notify_email"
		}},
		{"a refused settings change", func() int {
			return apiCall(t, app, token, "PUT", siteURL+"/settings", `{"name":""}`, nil)
		}, http.StatusBadRequest, "", "", nil},
		{"an API token made", func() int {
			var out struct{ ID int64 }
			code := apiCall(t, app, token, "POST", "/v1/api/tokens", `{"name":"ci"}`, &out)
			tokenID = out.ID
			return code
		}, http.StatusCreated, store.AuditTokenCreated, "ann@shop.example", func(e store.AuditEntry) bool { return e.Detail["token_id"] == float64(tokenID) }},
		{"an API token revoked", func() int {
			return apiCall(t, app, token, "DELETE", "/v1/api/tokens/"+strconv.FormatInt(tokenID, 10), "", nil)
		}, http.StatusNoContent, store.AuditTokenDeleted, "ann@shop.example", nil},
		{"a token revoked again", func() int {
			return apiCall(t, app, token, "DELETE", "/v1/api/tokens/"+strconv.FormatInt(tokenID, 10), "", nil)
		}, http.StatusNoContent, "", "", nil},
		{"an invitation", func() int {
			var out struct{ Invite store.Invite }
			code := apiCall(t, app, token, "POST", siteURL+"/invites", `{"email":"zed@shop.example","role":"agent"}`, &out)
			inviteID = out.Invite.ID
			return code
		}, http.StatusCreated, store.AuditInviteCreated, "ann@shop.example", func(e store.AuditEntry) bool { return e.Detail["email"] == "zed@shop.example" }},
		{"an invitation withdrawn", func() int {
			return apiCall(t, app, token, "DELETE", siteURL+"/invites/"+strconv.FormatInt(inviteID, 10), "", nil)
		}, http.StatusNoContent, store.AuditInviteWithdrawn, "ann@shop.example", nil},
		{"another invitation", func() int {
			var out struct{ Link string }
			code := apiCall(t, app, token, "POST", siteURL+"/invites", `{"email":"zed@shop.example","role":"agent"}`, &out)
			inviteLink = out.Link
			return code
		}, http.StatusCreated, store.AuditInviteCreated, "ann@shop.example", nil},
		{"an invitation accepted", func() int {
			var out struct{ Operator store.Operator }
			tok := inviteLink[strings.LastIndex(inviteLink, "/")+1:]
			code := public("POST", "/v1/api/invites/accept", `{"token":"`+tok+`","name":"Zed","password":"a long enough one"}`, &out).StatusCode
			joined = out.Operator.ID
			return code
		}, http.StatusOK, store.AuditInviteAccepted, "zed@shop.example", nil},
		{"a role changed", func() int {
			return apiCall(t, app, token, "PUT", siteURL+"/members/"+strconv.FormatInt(joined, 10), `{"role":"owner"}`, nil)
		}, http.StatusOK, store.AuditRoleChanged, "ann@shop.example", func(e store.AuditEntry) bool { return e.Detail["role"] == "owner" }},
		{"a member removed", func() int {
			return apiCall(t, app, token, "DELETE", siteURL+"/members/"+strconv.FormatInt(joined, 10), "", nil)
		}, http.StatusNoContent, store.AuditMemberRemoved, "ann@shop.example", nil},
		{"the last owner demoted: refused", func() int {
			var me struct{ Operator store.Operator }
			apiCall(t, app, token, "GET", "/v1/api/me", "", &me)
			return apiCall(t, app, token, "PUT", siteURL+"/members/"+strconv.FormatInt(me.Operator.ID, 10), `{"role":"agent"}`, nil)
		}, http.StatusConflict, "", "", nil},
		{"a person exported", func() int {
			return apiCall(t, app, token, "GET", siteURL+"/people/export?email=zoe%40example.com", "", nil)
		}, http.StatusOK, store.AuditPersonExported, "ann@shop.example", func(e store.AuditEntry) bool { return e.Detail["by"] == "email" }},
		{"a person erased", func() int {
			return apiCall(t, app, token, "DELETE", siteURL+"/people?email=zoe%40example.com", "", nil)
		}, http.StatusOK, store.AuditPersonErased, "ann@shop.example", func(e store.AuditEntry) bool { return e.Detail["messages"] == float64(1) }},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before := count()
			if code := s.do(); code != s.code {
				t.Fatalf("answered %d, want %d", code, s.code)
			}
			if s.action == "" {
				if n := count(); n != before {
					t.Errorf("%d entries written for an action that changed nothing", n-before)
				}
				return
			}
			list, err := st.AuditLog(ctx, 0, store.AuditQuery{Limit: 1})
			testkit.NoErr(t, err)
			if count() != before+1 || len(list) != 1 {
				t.Fatalf("entries %d → %d, want one more", before, count())
			}
			e := list[0]
			if e.Action != s.action || e.Actor != s.actor || e.Address == "" || (s.check != nil && !s.check(e)) {
				t.Errorf("entry %+v; want %s by %s from an address", e, s.action, s.actor)
			}
		})
	}
	// With the session of the login above (its cookie and CSRF token): a password change
	// (which keeps this session) and a logout, each a change and its entry in one commit.
	for _, s := range []struct {
		path, body string
		action     store.AuditAction
	}{
		{"/v1/api/me/password", `{"current_password":"correct horse","new_password":"battery staple"}`, store.AuditPasswordChanged},
		{"/v1/api/logout", "", store.AuditLogout},
	} {
		t.Run(string(s.action), func(t *testing.T) {
			before := count()
			resp := public("POST", s.path, s.body, nil, "Cookie", CookieName+"="+session.cookie, CSRFHeader, session.CSRF)
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("%s: %d", s.path, resp.StatusCode)
			}
			list, err := st.AuditLog(ctx, 0, store.AuditQuery{Limit: 1})
			testkit.NoErr(t, err)
			if count() != before+1 || list[0].Action != s.action || list[0].Actor != "ann@shop.example" {
				t.Errorf("after %s: %+v", s.path, list)
			}
		})
	}
}
