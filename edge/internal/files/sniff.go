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

// extensions are the names' endings that agree with each stored type; the first is given to
// a name that has none of them.
var extensions = map[string][]string{
	"image/png": {".png"}, "image/jpeg": {".jpg", ".jpeg"}, "image/gif": {".gif"}, "image/webp": {".webp"},
	"application/pdf": {".pdf"}, "text/plain": {".txt", ".log", ".csv", ".md", ".json"}, "application/zip": {".zip"},
}

// risky are endings an operator's computer may open with something that runs what it holds.
var risky = map[string]bool{".html": true, ".htm": true, ".xhtml": true, ".shtml": true, ".svg": true, ".svgz": true,
	".xml": true, ".xsl": true, ".js": true, ".mjs": true, ".hta": true, ".mht": true, ".mhtml": true, ".url": true}

// NameFor is the name an upload is stored and served under: its name with an ending that
// says what its content is. x.html holding a PNG is x.png; notes.html holding text is
// notes.txt; a risky ending on other content becomes .bin. So a name never disagrees with
// what is served.
func NameFor(name, typ string) string {
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	if base == "" {
		base = "file"
	}
	low := strings.ToLower(ext)
	if want, ok := extensions[typ]; ok {
		for _, e := range want {
			if low == e {
				return name
			}
		}
		return base + want[0]
	}
	if risky[low] {
		return base + ".bin"
	}
	return name
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

var formEscapes = strings.NewReplacer("%22", `"`, "%0D", "\r", "%0A", "\n", "%0d", "\r", "%0a", "\n")

// CleanName keeps the last element of a file name, without control or path characters, at
// most 200 characters ("file" if nothing is left).
func CleanName(name string) string {
	// Browsers send a multipart file name with ", CR and LF written %22, %0D and %0A (the
	// WHATWG form encoding): read them back, so they are dropped below, not escaped twice.
	name = formEscapes.Replace(name)
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
