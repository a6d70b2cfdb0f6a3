package inbox

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// The canned replies API: an operator of the site adds, lists, edits and removes; a duplicate
// title or an empty text gets 400 with a sentence; another site's list and replies are closed
// to them.
func TestCannedRepliesAPI(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	other := &store.Site{Name: "Other", Origins: []string{"https://other.example"}}
	testkit.NoErr(t, st.Write(context.Background(), func(tx *store.Tx) error { return tx.AddSite(other) }))
	base := "/v1/api/sites/" + strconv.FormatInt(site.ID, 10) + "/canned"
	call := func(method, path, body string, out any) int {
		t.Helper()
		return apiCall(t, app, token, method, path, body, out)
	}
	var hello store.CannedReply
	if st := call("POST", base, `{"title":"Hello","text":"Hi {{visitor.name|there}}!"}`, &hello); st != http.StatusCreated || hello.ID == 0 || hello.UpdatedBy != "Ann" {
		t.Fatalf("add: %d %+v", st, hello)
	}
	var refused struct{ Code, Message string }
	for _, c := range []struct{ body, says string }{
		{`{"title":"hello","text":"x"}`, "already"},
		{`{"title":"Empty","text":"  "}`, "Write the reply"},
		{`not json`, `{"title"`},
	} {
		if st := call("POST", base, c.body, &refused); st != http.StatusBadRequest || refused.Code != "invalid" || !strings.Contains(refused.Message, c.says) {
			t.Errorf("%s: %d %+v; want 400 invalid saying %q", c.body, st, refused, c.says)
		}
	}
	var edited store.CannedReply
	if st := call("PUT", base+"/"+strconv.FormatInt(hello.ID, 10), `{"title":"Hello","text":"Welcome back"}`, &edited); st != 200 || edited.Text != "Welcome back" {
		t.Fatalf("edit: %d %+v", st, edited)
	}
	var list struct{ Canned []store.CannedReply }
	if st := call("GET", base, "", &list); st != 200 || len(list.Canned) != 1 || list.Canned[0].Text != "Welcome back" {
		t.Fatalf("list: %d %+v", st, list)
	}
	otherBase := "/v1/api/sites/" + strconv.FormatInt(other.ID, 10) + "/canned"
	// 403 for a site of others; here the registry does not know it: 404. Either way, closed.
	if st := call("GET", otherBase, "", nil); st != http.StatusForbidden && st != http.StatusNotFound {
		t.Errorf("another site's list: %d", st)
	}
	if st := call("DELETE", otherBase+"/"+strconv.FormatInt(hello.ID, 10), "", nil); st != http.StatusForbidden && st != http.StatusNotFound {
		t.Errorf("delete through another site: %d", st)
	}
	if st := call("DELETE", base+"/999999", "", &refused); st != http.StatusNotFound || refused.Code != "not_found" {
		t.Errorf("delete of no reply: %d %+v", st, refused)
	}
	if st := call("DELETE", base+"/"+strconv.FormatInt(hello.ID, 10), "", nil); st != http.StatusNoContent {
		t.Errorf("delete: %d", st)
	}
	if st := call("GET", base, "", &list); st != 200 || len(list.Canned) != 0 {
		t.Fatalf("list after the delete: %d %+v", st, list)
	}
}
