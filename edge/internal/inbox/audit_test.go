package inbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"spookat/edge/internal/store"
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
