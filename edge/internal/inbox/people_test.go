package inbox

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// A person's export over the API, by each selector: one archive with person.json (every
// conversation of theirs with its messages, no internal note, their identity and rating)
// and their attachments; another person's words are not in it; an agent may not export; a
// selector that matches nobody, or two selectors, get a sentence.
func TestExportPerson(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	ctx := context.Background()
	conv := func(visitor, email, userID, text string) int64 {
		ch := make(chan store.MessageResult, 1)
		testkit.NoErr(t, st.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte(visitor), Author: schema.AuthorVisitor, Text: text, ClientID: visitor,
			Done: func(r store.MessageResult) { ch <- r }}))
		r := <-ch
		testkit.NoErr(t, st.Write(ctx, func(tx *store.Tx) error {
			return tx.Exec(`UPDATE visitors SET email = ?, user_id = nullif(?, ''), name = 'Zoë' WHERE id = ?`, email, userID, r.VisitorID)
		}))
		return r.ConversationID
	}
	zoe1 := conv("zoe-laptop", "zoe@example.com", "u-7", "My order 1234 never came")
	zoe2 := conv("zoe-phone", "ZOE@example.com", "", "Still waiting, from my phone")
	conv("max", "max@example.com", "u-8", "Max's own words")
	reply := func(convID int64, body string) {
		t.Helper()
		if code := apiCall(t, app, token, "POST", "/v1/api/conversations/"+strconv.FormatInt(convID, 10)+"/messages", body, nil); code != 201 {
			t.Fatalf("reply: %d", code)
		}
	}
	var f schema.File
	if code := uploadFile(t, app, token, zoe1, "label.pdf", []byte("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"), &f); code != 201 {
		t.Fatalf("upload: %d", code)
	}
	reply(zoe1, `{"text":"Here is the return label","file":"`+f.ID+`"}`)
	reply(zoe1, `{"text":"she sounds upset","internal":true}`)
	reply(zoe2, `{"text":"Sorry about that!"}`)

	export := func(query string) (int, map[string][]byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", "/v1/api/sites/"+strconv.FormatInt(site.ID, 10)+"/people/export?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := app.Test(req, 10_000)
		testkit.NoErr(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("%d: %s", resp.StatusCode, b)
			return resp.StatusCode, nil
		}
		gz, err := gzip.NewReader(resp.Body)
		testkit.NoErr(t, err)
		tr := tar.NewReader(gz)
		out := map[string][]byte{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			testkit.NoErr(t, err)
			out[h.Name], _ = io.ReadAll(tr)
		}
		return 200, out
	}
	for _, c := range []struct {
		name, query string
		convs       int
	}{
		{"by email, any case: both of Zoë's visitors", "email=" + url.QueryEscape("Zoe@Example.com"), 2},
		{"by user id", "user=u-7", 1},
		{"by visitor id", "visitor=1", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, files := export(c.query)
			if code != 200 {
				t.Fatalf("export: %d", code)
			}
			var p store.PersonExport
			testkit.NoErr(t, json.Unmarshal(files["person.json"], &p))
			if p.Format != store.PersonExportFormat || p.Version != 1 || len(p.Conversations) != c.convs || p.Site.Name != "Shop" {
				t.Fatalf("document: %+v", p)
			}
			doc := string(files["person.json"])
			for _, gone := range []string{"Max's own words", "she sounds upset"} {
				if strings.Contains(doc, gone) {
					t.Errorf("the export holds %q", gone)
				}
			}
			if !strings.Contains(doc, "My order 1234 never came") || !strings.Contains(doc, "Here is the return label") {
				t.Errorf("the export lacks Zoë's conversation:\n%s", doc)
			}
			if pdf := files["files/"+f.ID+"-label.pdf"]; !strings.HasPrefix(string(pdf), "%PDF-1.4") {
				t.Errorf("the attachment is not in the archive: %v", len(files))
			}
		})
	}
	var refused struct{ Code, Message string }
	for _, q := range []string{"email=nobody@example.com", "email=zoe@example.com&user=u-7", "", "visitor=abc"} {
		req, _ := http.NewRequest("GET", "/v1/api/sites/"+strconv.FormatInt(site.ID, 10)+"/people/export?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := app.Test(req, 10_000)
		testkit.NoErr(t, err)
		_ = json.NewDecoder(resp.Body).Decode(&refused)
		resp.Body.Close()
		if resp.StatusCode == 200 || refused.Message == "" {
			t.Errorf("%q: %d %+v; want a refusal with a sentence", q, resp.StatusCode, refused)
		}
	}
	// An agent may not.
	_, agentToken := addMember(t, st, site, "agent@shop.example", store.RoleAgent)
	if code := apiCall(t, app, agentToken, "GET", "/v1/api/sites/"+strconv.FormatInt(site.ID, 10)+"/people/export?user=u-7", "", &refused); code != http.StatusForbidden {
		t.Errorf("an agent's export: %d", code)
	}
}

// Erasing a person over the API: an agent may not; an owner erases by email and is told what
// went and what had reached Slack; the person's export and search find nothing after; another
// person stays.
func TestErasePersonAPI(t *testing.T) {
	app, st, site, token := settingsApp(t, false)
	ctx := context.Background()
	ch := make(chan store.MessageResult, 2)
	for _, v := range []string{"zoe", "max"} {
		testkit.NoErr(t, st.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte(v), Author: schema.AuthorVisitor, Text: v + " writes", ClientID: v,
			Done: func(r store.MessageResult) { ch <- r }}))
		r := <-ch
		testkit.NoErr(t, st.Write(ctx, func(tx *store.Tx) error {
			return tx.Exec(`UPDATE visitors SET email = ? WHERE id = ?`, v+"@example.com", r.VisitorID)
		}))
		if v == "zoe" {
			testkit.NoErr(t, st.Write(ctx, func(tx *store.Tx) error {
				_, _, err := tx.RecordDelivery(&schema.Result{MessageID: r.MessageID, Target: schema.TargetWebhook, Status: schema.StatusDelivered, ExternalID: "msg_1"}, false)
				return err
			}))
		}
	}
	_, agentToken := addMember(t, st, site, "agent@shop.example", store.RoleAgent)
	path := "/v1/api/sites/" + strconv.FormatInt(site.ID, 10) + "/people?email=zoe%40example.com"
	if code := apiCall(t, app, agentToken, "DELETE", path, "", nil); code != http.StatusForbidden {
		t.Fatalf("an agent's erasure: %d", code)
	}
	var res struct {
		Erased struct {
			Visitors, Conversations, Messages int
			Delivered                         []store.ErasedDelivery
		}
		Note         string
		WebhookEvent string `json:"webhook_event"`
	}
	if code := apiCall(t, app, token, "DELETE", path, "", &res); code != 200 || res.Erased.Visitors != 1 || res.Erased.Messages != 1 ||
		len(res.Erased.Delivered) != 1 || res.Erased.Delivered[0].ExternalID != "msg_1" || !strings.Contains(res.Note, "cannot be unsent") ||
		!strings.Contains(res.WebhookEvent, "no webhook") {
		t.Fatalf("erase: %d %+v", code, res)
	}
	if code := apiCall(t, app, token, "GET", "/v1/api/sites/"+strconv.FormatInt(site.ID, 10)+"/people/export?email=zoe%40example.com", "", nil); code != http.StatusNotFound {
		t.Errorf("export after the erasure: %d", code)
	}
	if code := apiCall(t, app, token, "DELETE", path, "", nil); code != http.StatusNotFound {
		t.Errorf("erasing again: %d", code)
	}
	var list struct{ Conversations []store.ConversationSummary }
	apiCall(t, app, token, "GET", "/v1/api/sites/"+strconv.FormatInt(site.ID, 10)+"/conversations?status=all", "", &list)
	if len(list.Conversations) != 1 || list.Conversations[0].VisitorEmail != "max@example.com" {
		t.Errorf("conversations after: %+v", list.Conversations)
	}
}
