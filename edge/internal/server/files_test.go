package server_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

var onePixelPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

type uploadReply struct {
	status int
	file   schema.File
	err    schema.HTTPError
	header http.Header
}

// upload posts a file as the chat window does: multipart, the visitor's token in a field.
func upload(t *testing.T, addr, siteKey, origin, token, name, typ string, data []byte) uploadReply {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	w.WriteField("visitor", token)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+name+`"`)
	h.Set("Content-Type", typ)
	part, _ := w.CreatePart(h)
	part.Write(data)
	w.Close()
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/widget/files?site="+url.QueryEscape(siteKey), &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := http.DefaultClient.Do(req)
	testkit.NoErr(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := uploadReply{status: res.StatusCode, header: res.Header}
	if res.StatusCode == http.StatusCreated {
		json.Unmarshal(b, &r.file)
	} else if err := json.Unmarshal(b, &r.err); err != nil || r.err.Code == "" || r.err.Message == "" {
		t.Fatalf("%d without a code and a sentence: %s", res.StatusCode, b)
	}
	return r
}

func get(t *testing.T, u string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	testkit.NoErr(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// A visitor's attachment from upload to every place it is read: the upload is checked and
// answered with an id, the message frame that names it is acked, a second tab of the
// visitor gets a signed link that serves the image with the headers that keep it inert, the
// site's operator reads it through the inbox API, and nobody else does.
func TestAttachments(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "files", Origins: []string{"http://site.test"},
		Widget: schema.WidgetSettings{FileMaxMB: 1}})
	other := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "other", Origins: []string{"http://site.test"}})
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	token := c.Hello.Visitor

	t.Run("refused uploads say why", func(t *testing.T) {
		html := []byte("<!doctype html><script>alert(document.cookie)</script>")
		for _, tc := range []struct {
			name, site, origin, token, file, typ string
			data                                 []byte
			status                               int
			code                                 string
		}{
			{"unknown site", "st_nope", "http://site.test", token, "a.png", "image/png", onePixelPNG, 404, "unknown_site"},
			{"another origin", site.Key, "http://evil.test", token, "a.png", "image/png", onePixelPNG, 403, "origin_not_allowed"},
			{"no visitor token", site.Key, "http://site.test", "", "a.png", "image/png", onePixelPNG, 400, schema.CodeInvalid},
			{"over the site's 1 MB", site.Key, "http://site.test", token, "big.png", "image/png", append(append([]byte{}, onePixelPNG...), make([]byte, 1<<20)...), 413, schema.CodeFileTooLarge},
			{"a page named .png", site.Key, "http://site.test", token, "shot.png", "image/png", html, 415, schema.CodeFileRefused},
			{"an SVG", site.Key, "http://site.test", token, "logo.svg", "image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), 415, schema.CodeFileRefused},
			{"empty", site.Key, "http://site.test", token, "a.txt", "text/plain", nil, 400, schema.CodeInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := upload(t, e.Addr, tc.site, tc.origin, tc.token, tc.file, tc.typ, tc.data)
				if r.status != tc.status || r.err.Code != tc.code {
					t.Fatalf("%d %+v, want %d %s", r.status, r.err, tc.status, tc.code)
				}
			})
		}
	})
	t.Run("a body over every limit is refused before it is read", func(t *testing.T) {
		conn, err := net.Dial("tcp", e.Addr)
		testkit.NoErr(t, err)
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/widget/files?site=%s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n",
			site.Key, schema.MaxFileMaxMB<<20+128<<10)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		testkit.NoErr(t, err)
		var e schema.HTTPError
		json.NewDecoder(res.Body).Decode(&e)
		if res.StatusCode != http.StatusRequestEntityTooLarge || e.Code != schema.CodeTooLarge || e.Message == "" {
			t.Fatalf("%d %+v", res.StatusCode, e)
		}
	})

	up := upload(t, e.Addr, site.Key, "http://site.test", token, "../shot.png", "image/png", onePixelPNG)
	if up.status != http.StatusCreated || up.file.Type != "image/png" || up.file.Name != "shot.png" || up.file.Size != int64(len(onePixelPNG)) {
		t.Fatalf("upload: %+v", up)
	}
	if up.header.Get("Access-Control-Allow-Origin") != "http://site.test" {
		t.Fatalf("the page cannot read the answer: %v", up.header)
	}
	t.Run("only the uploader's socket sends it", func(t *testing.T) {
		stranger := edgetest.Dial(t, e.Addr, site.Key, "")
		stranger.Send(t, map[string]string{"type": "message", "client_id": "s-1", "file": up.file.ID})
		if f := stranger.Read(t); f.Type != "error" || f.Code != schema.CodeInvalid || f.ClientID != "s-1" {
			t.Fatalf("another visitor sent the upload: %+v", f)
		}
	})
	c.Send(t, map[string]string{"type": "message", "client_id": "f-1", "text": "", "file": up.file.ID})
	ack := c.Read(t)
	if ack.Type != "ack" || ack.MessageID == 0 {
		t.Fatalf("ack = %+v", ack)
	}

	tab := edgetest.Dial(t, e.Addr, site.Key, token) // the visitor's second tab reads the history
	tab.Send(t, map[string]any{"type": "resume", "after_message_id": 0})
	m := tab.Read(t)
	if m.Type != "message" || m.File == nil || m.File.ID != up.file.ID || !strings.HasPrefix(m.File.URL, "/v1/files/"+up.file.ID+"?") {
		t.Fatalf("history: %+v", m)
	}
	link := "http://" + e.Addr + m.File.URL
	t.Run("the signed link serves the image, inert", func(t *testing.T) {
		res, b := get(t, link)
		h := res.Header
		if res.StatusCode != 200 || !bytes.Equal(b, onePixelPNG) || h.Get("Content-Type") != "image/png" ||
			h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") ||
			!strings.HasPrefix(h.Get("Content-Disposition"), "inline") {
			t.Fatalf("%d %v", res.StatusCode, h)
		}
	})
	t.Run("a link altered or unsigned is 404", func(t *testing.T) {
		for _, u := range []string{
			strings.Replace(link, "exp=", "exp=9", 1),
			link[:strings.Index(link, "?")],
			strings.Replace(link, up.file.ID, strings.Repeat("A", len(up.file.ID)), 1),
		} {
			if res, _ := get(t, u); res.StatusCode != http.StatusNotFound {
				t.Fatalf("%s: %d", u, res.StatusCode)
			}
		}
	})

	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@files.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "bob@other.test", Password: "correct horse battery", SiteKeys: []string{other.Key}})
	t.Run("the site's operator reads it in the inbox", func(t *testing.T) {
		in := edgetest.Login(t, e.Addr, "ann@files.test", "correct horse battery").NewToken(t)
		var conv struct {
			Messages []struct {
				File *schema.File `json:"file"`
			} `json:"messages"`
		}
		if st := in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ack.ConversationID, 10), nil, &conv); st != 200 {
			t.Fatalf("conversation: %d", st)
		}
		if len(conv.Messages) != 1 || conv.Messages[0].File == nil || conv.Messages[0].File.URL != "/v1/api/files/"+up.file.ID {
			t.Fatalf("conversation: %+v", conv)
		}
		res, b := get(t, "http://"+e.Addr+conv.Messages[0].File.URL, "Authorization", "Bearer "+in.Token)
		if res.StatusCode != 200 || !bytes.Equal(b, onePixelPNG) {
			t.Fatalf("%d %q", res.StatusCode, b)
		}
	})
	t.Run("another site's operator does not", func(t *testing.T) {
		in := edgetest.Login(t, e.Addr, "bob@other.test", "correct horse battery").NewToken(t)
		if res, _ := get(t, "http://"+e.Addr+"/v1/api/files/"+up.file.ID, "Authorization", "Bearer "+in.Token); res.StatusCode != http.StatusNotFound {
			t.Fatalf("%d", res.StatusCode)
		}
		if res, _ := get(t, "http://"+e.Addr+"/v1/api/files/"+up.file.ID); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("without a login: %d", res.StatusCode)
		}
	})
}
