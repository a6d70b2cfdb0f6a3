package inbox

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// An operator's attachment: uploaded for a conversation, sent with a reply (text or not),
// and only by its uploader, in that conversation; a page disguised as an image is refused.
func TestOperatorAttachment(t *testing.T) {
	app, st, site, annToken := settingsApp(t, false)
	ctx := context.Background()
	bobToken := TokenPrefix + randomToken(24)
	testkit.NoErr(t, st.Write(ctx, func(tx *store.Tx) error {
		bob, err := tx.AddOperator("bob@shop.example", "Bob", "correct horse", []string{site.Key})
		if err != nil {
			return err
		}
		_, err = tx.AddAPIToken(bob.ID, hashToken(bobToken), "test")
		return err
	}))
	conv := func(visitor string) int64 {
		ch := make(chan store.MessageResult, 1)
		testkit.NoErr(t, st.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte(visitor), Author: schema.AuthorVisitor, Text: "hi", ClientID: "1",
			Done: func(r store.MessageResult) { ch <- r }}))
		return (<-ch).ConversationID
	}
	one, two := conv("visitor-one"), conv("visitor-two")
	upload := func(token string, convID int64, name string, data []byte, out any) int {
		t.Helper()
		return uploadFile(t, app, token, convID, name, data, out)
	}
	pdf := []byte("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n")
	var f schema.File
	if code := upload(annToken, one, "manual.pdf", pdf, &f); code != 201 || f.ID == "" || f.Type != "application/pdf" {
		t.Fatalf("upload: %d %+v", code, f)
	}
	var refused struct{ Code, Message string }
	if code := upload(annToken, one, "shot.png", []byte("<!doctype html><script>alert(1)</script>"), &refused); code != 415 || refused.Code != schema.CodeFileRefused {
		t.Errorf("a page named .png: %d %+v", code, refused)
	}
	path := func(c int64) string { return "/v1/api/conversations/" + strconv.FormatInt(c, 10) + "/messages" }
	if code := apiCall(t, app, bobToken, "POST", path(one), `{"file":"`+f.ID+`"}`, &refused); code != 400 || !bytes.Contains([]byte(refused.Message), []byte("No upload of yours")) {
		t.Errorf("Bob sends Ann's upload: %d %+v", code, refused)
	}
	var sent struct {
		Message struct {
			ID   int64
			File *schema.File
		}
	}
	if code := apiCall(t, app, annToken, "POST", path(one), `{"file":"`+f.ID+`"}`, &sent); code != 201 || sent.Message.File == nil || sent.Message.File.Name != "manual.pdf" {
		t.Fatalf("the reply with the file, no text: %d %+v", code, sent)
	}
	if code := apiCall(t, app, annToken, "POST", path(two), `{"text":"and here","file":"`+f.ID+`"}`, &refused); code != 400 {
		t.Errorf("the same upload in another conversation: %d %+v", code, refused)
	}
	got, found, err := st.FileByKey(ctx, f.ID)
	testkit.NoErr(t, err)
	if !found || got.ConversationID != one || got.MessageID != sent.Message.ID {
		t.Errorf("the file's row: %+v", got)
	}
}

// uploadFile posts an operator's attachment for a conversation (multipart, field "file"),
// decodes the answer into out (unless nil) and returns the status.
func uploadFile(t *testing.T, app *fiber.App, token string, convID int64, name string, data []byte, out any) int {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, _ := w.CreateFormFile("file", name)
	fw.Write(data)
	w.Close()
	req := httptest.NewRequest("POST", "/v1/api/conversations/"+strconv.FormatInt(convID, 10)+"/files", &body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := app.Test(req, 10_000)
	testkit.NoErr(t, err)
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}
