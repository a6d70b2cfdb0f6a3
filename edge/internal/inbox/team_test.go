package inbox

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"spookat/edge/internal/store"
)

// Roles over the API: an agent answers but cannot read or change the settings or the team;
// an owner changes roles and removes members; the last owner stays; a removed member's next
// call is refused.
func TestTeamAPI(t *testing.T) {
	app, st, site, annToken := settingsApp(t, false)
	bob, bobToken := addMember(t, st, site, "bob@shop.example", store.RoleAgent)
	siteURL := "/v1/api/sites/" + strconv.FormatInt(site.ID, 10)
	call := func(token, method, path, body string, out any) int {
		t.Helper()
		return apiCall(t, app, token, method, path, body, out)
	}
	var me struct {
		Sites []store.SiteRef `json:"sites"`
	}
	if code := call(bobToken, "GET", "/v1/api/me", "", &me); code != 200 || len(me.Sites) != 1 || me.Sites[0].Role != store.RoleAgent {
		t.Fatalf("Bob's /me: %d %+v", code, me)
	}
	var refused struct{ Code, Message string }
	for _, c := range []struct{ method, path, body string }{
		{"GET", siteURL + "/settings", ""},
		{"PUT", siteURL + "/settings", `{"name":"Mine now"}`},
		{"PUT", siteURL + "/members/" + strconv.FormatInt(bob.ID, 10), `{"role":"owner"}`},
		{"DELETE", siteURL + "/members/1", ""},
	} {
		if code := call(bobToken, c.method, c.path, c.body, &refused); code != http.StatusForbidden || !strings.Contains(refused.Message, "owners") {
			t.Errorf("agent %s %s: %d %+v; want 403 naming the owners", c.method, c.path, code, refused)
		}
	}
	var members struct{ Members []store.Member }
	if code := call(bobToken, "GET", siteURL+"/members", "", &members); code != 200 || len(members.Members) != 2 {
		t.Fatalf("an agent lists the members (to assign): %d %+v", code, members)
	}
	annID := members.Members[0].ID // by name: Ann first
	if code := call(annToken, "PUT", siteURL+"/members/"+strconv.FormatInt(annID, 10), `{"role":"agent"}`, &refused); code != http.StatusConflict || refused.Code != "last_owner" {
		t.Errorf("the last owner made an agent: %d %+v", code, refused)
	}
	if code := call(annToken, "PUT", siteURL+"/members/"+strconv.FormatInt(bob.ID, 10), `{"role":"boss"}`, &refused); code != http.StatusBadRequest || !strings.Contains(refused.Message, "owner") {
		t.Errorf("a role of no meaning: %d %+v", code, refused)
	}
	if code := call(annToken, "PUT", siteURL+"/members/"+strconv.FormatInt(bob.ID, 10), `{"role":"owner"}`, nil); code != 200 {
		t.Fatalf("Bob made an owner: %d", code)
	}
	if code := call(bobToken, "GET", siteURL+"/settings", "", nil); code != 200 {
		t.Fatalf("Bob, an owner, reads the settings: %d", code)
	}
	if code := call(bobToken, "DELETE", siteURL+"/members/"+strconv.FormatInt(annID, 10), "", nil); code != http.StatusNoContent {
		t.Fatalf("Bob removes Ann: %d", code)
	}
	if code := call(annToken, "GET", siteURL+"/conversations", "", nil); code != http.StatusForbidden {
		t.Errorf("Ann after her removal: %d", code)
	}
	if code := call(bobToken, "DELETE", siteURL+"/members/"+strconv.FormatInt(bob.ID, 10), "", &refused); code != http.StatusConflict {
		t.Errorf("the last owner removes themselves: %d %+v", code, refused)
	}
}
