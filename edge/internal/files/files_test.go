package files

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/schema"
	"spookat/schema/testkit"
)

// A 1×1 PNG, and the magic numbers of the other types.
var (
	png, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
	jpeg   = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	gif    = []byte("GIF89a\x01\x00\x01\x00")
	webp   = []byte("RIFF\x1a\x00\x00\x00WEBPVP8 ")
	pdf    = []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	html   = []byte("<!DOCTYPE html><html><script>alert(document.cookie)</script>")
	svg    = []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`)
	xml    = []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
)

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		name, file, claimed string
		head                []byte
		want                string // "" when refused
		refusal             string
	}{
		{"png", "shot.png", "image/png", png, "image/png", ""},
		{"pasted png without a name", "image", "image/png", png, "image/png", ""},
		{"jpeg", "photo.JPG", "image/jpeg", jpeg, "image/jpeg", ""},
		{"gif", "a.gif", "", gif, "image/gif", ""},
		{"webp", "a.webp", "image/webp", webp, "image/webp", ""},
		{"pdf", "invoice.pdf", "application/pdf", pdf, "application/pdf", ""},
		{"text", "log.txt", "text/plain", []byte("line one\nline two\n"), "text/plain", ""},
		{"unknown binary is a download", "data.bin", "", []byte{0, 1, 2, 3, 0xfe}, "application/octet-stream", ""},
		{"a png named .jpg is refused", "shot.jpg", "image/jpeg", png, "", "named .jpg"},
		{"html named .png", "shot.png", "image/png", html, "", "HTML"},
		{"html claiming to be an image", "shot", "image/png", []byte("hello, not an image"), "", "says it is an image"},
		{"html as html", "page.html", "text/html", html, "", "HTML"},
		{"svg without a declaration", "logo.svg", "image/svg+xml", svg, "", "SVG"},
		{"svg with a declaration", "logo.svg", "image/svg+xml", xml, "", "XML or SVG"},
		{"text disguised as pdf", "invoice.pdf", "application/pdf", []byte("plain"), "", "not a PDF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, r := Sniff(tc.file, tc.claimed, tc.head)
			if tc.want != "" {
				if r != nil || got != tc.want {
					t.Fatalf("Sniff = %q, %v; want %q", got, r, tc.want)
				}
				return
			}
			if r == nil || !strings.Contains(r.Message, tc.refusal) {
				t.Fatalf("Sniff = %q, %v; want a refusal naming %q", got, r, tc.refusal)
			}
		})
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"shot.png":                      "shot.png",
		"../../etc/passwd":              "passwd",
		`C:\Users\me\Desktop\scan.pdf`:  "scan.pdf",
		"a\x00b\r\nc.txt":               "abc.txt",
		"evil\u202egnp.exe":             "evilgnp.exe",
		"":                              "file",
		"..":                            "file",
		strings.Repeat("x", 300) + ".p": strings.Repeat("x", 198) + ".p",
		"my %22best%22 shot.png":        "my best shot.png", // as a browser's form sends my "best" shot.png
		"two%0D%0Alines.txt":            "twolines.txt",
	} {
		if got := CleanName(in); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A stored name says what the content is: a name never disagrees with what is served.
func TestNameFor(t *testing.T) {
	for _, tc := range []struct{ name, typ, want string }{
		{"x.html", "image/png", "x.png"},
		{"evil.html", "text/plain", "evil.txt"},
		{"photo.JPEG", "image/jpeg", "photo.JPEG"},
		{"scan", "application/pdf", "scan.pdf"},
		{"notes.md", "text/plain", "notes.md"},
		{"page.svg", "application/octet-stream", "page.bin"},
		{"archive.tar", "application/octet-stream", "archive.tar"},
		{".png", "image/png", ".png"},
	} {
		if got := NameFor(tc.name, tc.typ); got != tc.want {
			t.Errorf("NameFor(%q, %s) = %q, want %q", tc.name, tc.typ, got, tc.want)
		}
	}
}

func TestSigner(t *testing.T) {
	s := NewSigner(bytes.Repeat([]byte{7}, 32))
	key, now := NewKey(), time.Unix(1_800_000_000, 0)
	link := s.Link("https://chat.example", key, now.Add(time.Hour))
	q := httptest.NewRequest("GET", link, nil).URL.Query()
	exp, sig := q.Get("exp"), q.Get("sig")
	t.Run("valid until it expires", func(t *testing.T) {
		if !s.Check(key, exp, sig, now) || !s.Check(key, exp, sig, now.Add(59*time.Minute)) {
			t.Fatal("a fresh link does not check")
		}
		if s.Check(key, exp, sig, now.Add(time.Hour)) {
			t.Fatal("an expired link checks")
		}
	})
	t.Run("bound to the file, the expiry and the key", func(t *testing.T) {
		if s.Check(NewKey(), exp, sig, now) {
			t.Fatal("the signature works for another file")
		}
		if s.Check(key, "1900000000", sig, now) {
			t.Fatal("a later expiry keeps the signature")
		}
		if NewSigner(bytes.Repeat([]byte{8}, 32)).Check(key, exp, sig, now) {
			t.Fatal("another edge's key checks")
		}
		if s.Check(key, exp, "", now) || s.Check(key, "", sig, now) {
			t.Fatal("an empty signature or expiry checks")
		}
	})
	t.Run("the key file is made once, private", func(t *testing.T) {
		dir := t.TempDir()
		a, err := OpenSigner(dir)
		testkit.NoErr(t, err)
		b, err := OpenSigner(dir)
		testkit.NoErr(t, err)
		q := httptest.NewRequest("GET", a.Link("", key, now.Add(time.Hour)), nil).URL.Query()
		if !b.Check(key, q.Get("exp"), q.Get("sig"), now) {
			t.Fatal("a restart changed the key: links given out stop working")
		}
		if fi, err := os.Stat(dir + "/" + KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v %v", fi.Mode(), err)
		}
	})
}

func TestDirAndServe(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	key := NewKey()
	if _, err := d.Put("../x", png); err == nil {
		t.Fatal("Put took a path for a key")
	}
	if _, err := d.Put(key, html); err != nil {
		t.Fatal(err)
	}
	pkey := NewKey()
	if _, err := d.Put(pkey, png); err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	files := map[string]schema.File{
		key:  {ID: key, Name: `page".html`, Type: "application/octet-stream", Size: int64(len(html))},
		pkey: {ID: pkey, Name: "shot.png", Type: "image/png", Size: int64(len(png))},
	}
	app.Get("/f/:key", func(c *fiber.Ctx) error { return d.Serve(c, files[c.Params("key")]) })
	for _, tc := range []struct {
		name, key, typ, disposition string
		body                        []byte
	}{
		{"a download never renders", key, "application/octet-stream", "attachment; filename*=UTF-8''page%22.html", html},
		{"an image is inline", pkey, "image/png", "inline; filename*=UTF-8''shot.png", png},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := app.Test(httptest.NewRequest("GET", "/f/"+tc.key, nil))
			testkit.NoErr(t, err)
			body, _ := io.ReadAll(res.Body)
			h := res.Header
			if res.StatusCode != 200 || !bytes.Equal(body, tc.body) || h.Get("Content-Type") != tc.typ ||
				h.Get("Content-Disposition") != tc.disposition || h.Get("X-Content-Type-Options") != "nosniff" ||
				!strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
				t.Fatalf("%d %q %v", res.StatusCode, body, h)
			}
		})
	}
	t.Run("a file gone from disk is 410, not a crash", func(t *testing.T) {
		gone := NewKey()
		files[gone] = schema.File{ID: gone, Name: "x.png", Type: "image/png", Size: 3}
		res, err := app.Test(httptest.NewRequest("GET", "/f/"+gone, nil))
		if err != nil || res.StatusCode != fiber.StatusGone {
			t.Fatalf("%v %v", res.StatusCode, err)
		}
	})
}
