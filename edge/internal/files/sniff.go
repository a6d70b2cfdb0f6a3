package files

import (
	"net/http"
	"path/filepath"
	"strings"
)

// Refusal says why an upload is not taken, as a sentence for the visitor.
type Refusal struct{ Message string }

func (r *Refusal) Error() string { return r.Message }

// The types an attachment is stored as. Images are shown inline; everything else is served
// as a download.
var byExtension = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".pdf": "application/pdf",
}

// active are contents a browser would run or render with scripts: never taken, whatever the
// name (served with a sandbox they could not run, but an operator may open a download
// outside the browser).
var active = map[string]string{"text/html": "HTML", "text/xml": "XML or SVG", "image/svg+xml": "SVG"}

// Sniff decides an upload's type from its first bytes (http.DetectContentType: the WHATWG
// sniffing algorithm), and refuses content a browser could run (HTML, SVG, XML) and content
// that is not what its name or the browser's claimed type says: a page named shot.png is
// refused, not stored as a download.
func Sniff(name, claimed string, head []byte) (string, *Refusal) {
	detected, _, _ := strings.Cut(http.DetectContentType(head), ";")
	if what, ok := active[detected]; ok || looksLikeSVG(head) {
		if !ok {
			what = "SVG"
		}
		return "", &Refusal{what + " files are not taken: they can carry scripts. Send a screenshot, a PDF or a text file instead."}
	}
	claimed, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(claimed)), ";")
	ext := strings.ToLower(filepath.Ext(name))
	if want, ok := byExtension[ext]; ok && want != detected {
		return "", &Refusal{"The file is named " + ext + " but its content is not " + article(want) + ": it was not sent."}
	}
	if strings.HasPrefix(claimed, "image/") && !strings.HasPrefix(detected, "image/") {
		return "", &Refusal{"The file says it is an image but its content is not one: it was not sent."}
	}
	switch detected {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain", "application/zip":
		return detected, nil
	}
	return "application/octet-stream", nil
}

func article(typ string) string {
	switch typ {
	case "application/pdf":
		return "a PDF"
	case "image/jpeg":
		return "a JPEG image"
	}
	return "a " + strings.ToUpper(strings.TrimPrefix(typ, "image/")) + " image"
}

// looksLikeSVG catches an SVG without an XML declaration, which sniffs as text/plain.
func looksLikeSVG(head []byte) bool {
	s := strings.ToLower(string(head))
	return strings.Contains(s, "<svg") || strings.Contains(s, "<!doctype") || strings.Contains(s, "<script")
}

// CleanName keeps the last element of a file name, without control or path characters, at
// most 200 characters ("file" if nothing is left).
func CleanName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '"' || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if r := []rune(name); len(r) > 200 {
		name = string(r[len(r)-200:])
	}
	if name == "" || name == "." || name == ".." {
		return "file"
	}
	return name
}
