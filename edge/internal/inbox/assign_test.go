package inbox

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// Assignment, snooze, filters, teammates and unread counts through the API (no browser):
// each refusal is a 400 or 409 that says what to send instead, nothing is stored by one, and
// what is accepted shows in the list's filters.
func TestAssignAndSnooze(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	ctx := context.Background()
	done := make(chan store.MessageResult, 1)
	if err := st.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"), Author: "visitor",
		Text: "hello", ClientID: "c1", Done: func(r store.MessageResult) { done <- r }}); err != nil {
		t.Fatal(err)
	}
	conv := strconv.FormatInt((<-done).ConversationID, 10)
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		resp := apiRequest(t, app, token, method, "/v1/api"+path, rd)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	listed := func(query string) int {
		t.Helper()
		code, out := call(http.MethodGet, "/sites/"+site.Key+"/conversations?"+query, nil)
		if code != 200 {
			t.Fatalf("list %s: %d %v", query, code, out)
		}
		return len(out["conversations"].([]any))
	}
	var annID float64
	if code, out := call(http.MethodGet, "/sites/"+site.Key+"/members", nil); code != 200 || len(out["members"].([]any)) != 1 {
		t.Fatalf("members: %d %v", code, out)
	} else {
		annID = out["members"].([]any)[0].(map[string]any)["id"].(float64)
	}
	soon := func(d time.Duration) string { return time.Now().Add(d).Format(time.RFC3339) }

	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code, says         string // the error's code and the start of its sentence
	}{
		{"an unknown filter", http.MethodGet, "/sites/" + site.Key + "/conversations?assignee=bob", nil, 400, "invalid", "assignee must be me, unassigned or all."},
		{"an unknown status", http.MethodGet, "/sites/" + site.Key + "/conversations?status=later", nil, 400, "invalid", "status must be open, snoozed, closed or all."},
		{"assign with no body", http.MethodPost, "/conversations/" + conv + "/assign", map[string]any{}, 400, "invalid", `The body must be JSON: {"operator_id": 12}`},
		{"assign to a stranger", http.MethodPost, "/conversations/" + conv + "/assign", map[string]any{"operator_id": 999}, 400, "invalid", "operator_id 999 is not a member of this conversation's site"},
		{"assign to Ann", http.MethodPost, "/conversations/" + conv + "/assign", map[string]any{"operator_id": annID}, 200, "", ""},
		{"snooze without a time", http.MethodPost, "/conversations/" + conv + "/snooze", map[string]any{"until": "tomorrow"}, 400, "invalid", "until must be a time in RFC 3339"},
		{"snooze for seconds", http.MethodPost, "/conversations/" + conv + "/snooze", map[string]any{"until": soon(10 * time.Second)}, 400, "invalid", "until must be at least a minute from now"},
		{"snooze for two years", http.MethodPost, "/conversations/" + conv + "/snooze", map[string]any{"until": soon(2 * 365 * 24 * time.Hour)}, 400, "invalid", "until must be at least a minute from now and at most a year."},
		{"snooze for an hour", http.MethodPost, "/conversations/" + conv + "/snooze", map[string]any{"until": soon(time.Hour)}, 200, "", ""},
		{"a conversation of no one's", http.MethodPost, "/conversations/999999/snooze", map[string]any{"until": soon(time.Hour)}, 404, "not_found", "No such conversation."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := call(tc.method, tc.path, tc.body)
			if code != tc.status {
				t.Fatalf("%d %v, want %d", code, out, tc.status)
			}
			if tc.code != "" && (out["code"] != tc.code || !strings.HasPrefix(out["message"].(string), tc.says)) {
				t.Fatalf("answer %v, want %s: %q…", out, tc.code, tc.says)
			}
		})
	}
	for q, want := range map[string]int{
		"status=snoozed&assignee=me": 1, "status=snoozed&assignee=unassigned": 0, "status=open": 0, "status=all&assignee=all": 1,
	} {
		if n := listed(q); n != want {
			t.Errorf("?%s lists %d, want %d", q, n, want)
		}
	}
	// The visitor's message wakes it: it is open and unread for Ann.
	if err := st.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte("0123456789abcdef0123456789abcdef"), Author: "visitor",
		Text: "still there?", ClientID: "c2", Done: func(r store.MessageResult) { done <- r }}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Err != nil {
		t.Fatal(r.Err)
	}
	if n := listed("status=open&assignee=me"); n != 1 {
		t.Fatalf("open and Ann's after the visitor wrote: %d listed, want 1", n)
	}
	if code, out := call(http.MethodGet, "/unread", nil); code != 200 || out["sites"].([]any)[0].(map[string]any)["unread"] != float64(1) {
		t.Fatalf("unread: %d %v", code, out)
	}
	// A closed conversation is not snoozed: reopened first.
	if code, _ := call(http.MethodPost, "/conversations/"+conv+"/close", nil); code != 200 {
		t.Fatalf("close: %d", code)
	}
	if code, out := call(http.MethodPost, "/conversations/"+conv+"/snooze", map[string]any{"until": soon(time.Hour)}); code != 409 || out["code"] != "closed" {
		t.Fatalf("snooze a closed conversation: %d %v, want 409 closed", code, out)
	}
	if code, out := call(http.MethodGet, "/unread", nil); code != 200 || out["sites"].([]any)[0].(map[string]any)["unread"] != float64(0) {
		t.Fatalf("unread once closed: %d %v, want 0", code, out)
	}
	var kinds []string
	if err := st.MessagesAfter(ctx, mustID(t, conv), 0, 100, true, func(m *store.Message) error {
		kinds = append(kinds, string(m.Kind))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, ","); got != ",assigned,snoozed,,closed" {
		t.Fatalf("messages of kinds %q: the refusals stored nothing, the changes one message each", got)
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	testkit.NoErr(t, err)
	return id
}
