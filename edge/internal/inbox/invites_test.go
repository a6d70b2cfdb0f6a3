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

// Invitations over the API: an owner invites (the job handed to JOBS carries the link, the
// answer too); an agent may not; a member's email is refused; the link says what it is for,
// refuses a short password, joins once and logs in; an existing account must give its own
// password; a withdrawn or used link answers as one never issued; the email's result moves
// the invitation's status.
func TestInvitesAPI(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	siteURL := "/v1/api/sites/" + strconv.FormatInt(site.ID, 10)
	call := func(token, method, path, body string, out any) int {
		t.Helper()
		return apiCall(t, app, token, method, path, body, out)
	}
	public := func(path, body string, out any) (int, *http.Response) {
		t.Helper()
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := app.Test(req, 10_000)
		testkit.NoErr(t, err)
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode, resp
	}
	var made struct {
		Invite store.Invite
		Link   string
	}
	if code := call(token, "POST", siteURL+"/invites", `{"email":"zed@shop.example","role":"agent"}`, &made); code != http.StatusCreated || made.Invite.ID == 0 || !strings.Contains(made.Link, "/app/#/invite/") {
		t.Fatalf("invite: %d %+v", code, made)
	}
	// No publisher here: the invitation stands, its email marked as not handed over.
	if made.Invite.Status != schema.StatusDead || !strings.Contains(made.Invite.LastError, "email lane") {
		t.Errorf("without a publisher: %+v", made.Invite)
	}
	tok := made.Link[strings.LastIndex(made.Link, "/")+1:]
	var refused struct{ Code, Message string }
	for _, c := range []struct{ body, says string }{
		{`{"email":"ann@shop.example"}`, "member of this site already"},
		{`{"email":"not an address"}`, "email"},
		{`{"email":"kim@shop.example","role":"boss"}`, "owner"},
	} {
		if code := call(token, "POST", siteURL+"/invites", c.body, &refused); code != http.StatusBadRequest || !strings.Contains(refused.Message, c.says) {
			t.Errorf("%s: %d %+v; want 400 saying %q", c.body, code, refused, c.says)
		}
	}
	var peek struct {
		Site, Email, Role string
		InvitedBy         string `json:"invited_by"`
		Account           bool
	}
	if code, _ := public("/v1/api/invites/peek", `{"token":"`+tok+`"}`, &peek); code != 200 || peek.Email != "zed@shop.example" || peek.Account || peek.InvitedBy != "Ann" || peek.Site != "Shop" {
		t.Fatalf("peek: %d %+v", code, peek)
	}
	if code, _ := public("/v1/api/invites/peek", `{"token":"not-a-token"}`, &refused); code != http.StatusNotFound || refused.Code != "gone" {
		t.Errorf("a made-up token: %d %+v", code, refused)
	}
	if code, _ := public("/v1/api/invites/accept", `{"token":"`+tok+`","name":"Zed","password":"short"}`, &refused); code != http.StatusBadRequest || !strings.Contains(refused.Message, "8 characters") {
		t.Errorf("a short password: %d %+v", code, refused)
	}
	code, resp := public("/v1/api/invites/accept", `{"token":"`+tok+`","name":"Zed","password":"a long enough one"}`, nil)
	if code != 200 || len(resp.Cookies()) == 0 {
		t.Fatalf("accept: %d, cookies %v", code, resp.Cookies())
	}
	if code, _ := public("/v1/api/invites/accept", `{"token":"`+tok+`","password":"a long enough one"}`, &refused); code != http.StatusNotFound {
		t.Errorf("the link used again: %d %+v", code, refused)
	}
	var members struct{ Members []store.Member }
	call(token, "GET", siteURL+"/members", "", &members)
	if len(members.Members) != 2 || members.Members[1].Email != "zed@shop.example" || members.Members[1].Role != store.RoleAgent {
		t.Fatalf("members after joining: %+v", members)
	}

	// An existing account joins another site with its own password.
	other := &store.Site{Name: "Other", Origins: []string{"https://other.example"}}
	var otherTok string
	testkit.NoErr(t, st.Write(context.Background(), func(tx *store.Tx) error {
		if err := tx.AddSite(other); err != nil {
			return err
		}
		otherTok = "tok-for-zed-other-site"
		_, err := tx.CreateInvite(other.ID, "ZED@shop.example", store.RoleOwner, 0, hashToken(otherTok))
		return err
	}))
	if code, _ := public("/v1/api/invites/peek", `{"token":"`+otherTok+`"}`, &peek); code != 200 || !peek.Account {
		t.Fatalf("peek for an existing account: %d %+v", code, peek)
	}
	if code, _ := public("/v1/api/invites/accept", `{"token":"`+otherTok+`","password":"not zed's"}`, &refused); code != http.StatusUnauthorized {
		t.Errorf("someone else's password: %d %+v", code, refused)
	}
	if code, _ := public("/v1/api/invites/accept", `{"token":"`+otherTok+`","password":"a long enough one"}`, nil); code != 200 {
		t.Errorf("the account's own password: %d", code)
	}

	// Withdrawn: the link answers as never issued; a worker's result for it is refused.
	call(token, "POST", siteURL+"/invites", `{"email":"kim@shop.example"}`, &made)
	var list struct{ Invites []store.Invite }
	if code := call(token, "GET", siteURL+"/invites", "", &list); code != 200 || len(list.Invites) != 1 || list.Invites[0].Email != "kim@shop.example" {
		t.Fatalf("invitations: %d %+v", code, list)
	}
	testkit.NoErr(t, st.Write(context.Background(), func(tx *store.Tx) error {
		found, err := tx.RecordInviteDelivery(&schema.Result{InviteID: made.Invite.ID, SiteID: site.ID, Status: schema.StatusDelivered})
		if err == nil && !found {
			t.Error("the result of a live invitation not found")
		}
		return err
	}))
	call(token, "GET", siteURL+"/invites", "", &list)
	if list.Invites[0].Status != schema.StatusDelivered {
		t.Errorf("status after a delivered result: %+v", list.Invites[0])
	}
	if code := call(token, "DELETE", siteURL+"/invites/"+strconv.FormatInt(made.Invite.ID, 10), "", nil); code != http.StatusNoContent {
		t.Fatalf("withdraw: %d", code)
	}
	kimTok := made.Link[strings.LastIndex(made.Link, "/")+1:]
	if code, _ := public("/v1/api/invites/peek", `{"token":"`+kimTok+`"}`, &refused); code != http.StatusNotFound {
		t.Errorf("a withdrawn link: %d", code)
	}
}
