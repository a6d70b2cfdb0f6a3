package browsertest

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// paste dispatches a paste of one file into the chat window's text box, as the browser does
// for a screenshot copied to the clipboard. make is JS that evaluates to the File.
func (b *Tab) paste(make string) {
	b.t.Helper()
	eval[any](b, `(async () => { const f = await (`+make+`); const dt = new DataTransfer(); dt.items.add(f);
		`+W+`.querySelector('.panel > form textarea').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})); })()`)
}

// screenshot is a 40×30 PNG drawn on a canvas, as a pasted screenshot arrives.
const screenshot = `new Promise(r => { const c = document.createElement('canvas'); c.width = 40; c.height = 30;
	const g = c.getContext('2d'); g.fillStyle = '#0a7c3e'; g.fillRect(0, 0, 40, 30);
	c.toBlob(b => r(new File([b], 'image.png', {type: 'image/png'})), 'image/png'); })`

// A pasted screenshot is shown at once in the visitor's window, sent, shown to the operator
// in the inbox and, after a reload, from the server's signed link; a file over the site's
// limit is refused before any upload, and a page disguised as a PNG by the server, each with
// a sentence in the bubble.
func TestPastedImageOnBothSides(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Files", Widget: schema.WidgetSettings{FileMaxMB: 1}})
	e.operator("ines@files.test", "Ines", "correct horse battery", site.Key)

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.paste(screenshot)
	loaded := func(sel string) string {
		return `(() => { const i = ` + sel + `; return i && i.complete && i.naturalWidth === 40 && i.naturalHeight === 30; })()`
	}
	v.waitJS("the image in the visitor's bubble, sent", loaded(W+`.querySelector('li.me .bubble img')`)+
		` && `+W+`.querySelector('li.me .state[data-state=sent]')`)
	v.shot("pasted-image")

	op := newTab(t, "operator")
	op.login(e.base, "ines@files.test", "correct horse battery")
	op.openFirstConversation()
	op.waitJS("the image in the inbox", loaded(`document.querySelector('#messages .msg.visitor .file img')`))
	if src := eval[string](op, `document.querySelector('#messages .msg.visitor .file img').getAttribute('src')`); !strings.HasPrefix(src, "/v1/api/files/") {
		t.Fatalf("the inbox shows the image from %q", src)
	}
	op.shot("inbox-image")

	v.do("reload the page", chromedp.Reload())
	v.waitJS("the launcher", `document.querySelector('#spookat-widget') && `+W+`.querySelector('#l')`)
	v.openChat()
	v.waitJS("the image from the server after a reload", loaded(W+`.querySelector('li.me .bubble img')`))
	if src := eval[string](v, W+`.querySelector('li.me .bubble img').src`); !strings.HasPrefix(src, e.base+"/v1/files/") || !strings.Contains(src, "sig=") {
		t.Fatalf("the window shows the image from %q", src)
	}

	t.Run("too large", func(t *testing.T) {
		v.paste(`new File([new Uint8Array(1536 * 1024)], 'big.png', {type: 'image/png'})`)
		v.waitJS("refused in its bubble", `Array.from(`+W+`.querySelectorAll('li.me.failed .state')).some(s => s.textContent.includes('the file is larger than 1 MB'))`)
	})
	t.Run("disguised", func(t *testing.T) {
		v.paste(`new File(['<!doctype html><script>alert(document.cookie)</script>'], 'shot.png', {type: 'image/png'})`)
		v.waitJS("refused by the server, in its bubble", `Array.from(`+W+`.querySelectorAll('li.me.failed .state')).some(s => s.textContent.includes('HTML files are not taken'))`)
		v.shot("refused-files")
	})
	v.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	v.shot("phone")
	if n := eval[int](op, `document.querySelectorAll('#messages .msg.visitor').length`); n != 1 {
		t.Fatalf("the inbox shows %d visitor messages; the refused files must not be among them", n)
	}
}

// Issue 34, point 4: an operator pastes an image and attaches a PDF in the inbox's composer;
// the visitor's window shows the image inline and the PDF as a download, both from signed
// links; a page disguised as a PNG is refused with a sentence, as a visitor's would be.
func TestOperatorFilesReachTheVisitor(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Files back"})
	e.operator("ines@files.test", "Ines", "correct horse battery", site.Key)

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.typeAndSend("Can you show me where the button is?")
	v.waitSent("Can you show me where the button is?")

	op := newTab(t, "operator")
	op.login(e.base, "ines@files.test", "correct horse battery")
	op.openFirstConversation()
	op.do("focus the reply", chromedp.WaitVisible(chromedp.CSS("#reply")), chromedp.Click(chromedp.CSS("#reply")))
	eval[any](op, `(async () => { const f = await (`+screenshot+`); const dt = new DataTransfer(); dt.items.add(f);
		document.querySelector('#reply').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})); })()`)
	op.waitJS("the pasted image uploaded", `document.querySelector('#attached span.ready')`)
	op.do("a word with it, send", chromedp.SendKeys(chromedp.CSS("#reply"), "Here:"), chromedp.Click(chromedp.CSS("#send")))
	op.waitJS("the image in the inbox", `document.querySelector('#messages .msg.operator .file img')`)

	loaded := `(() => { const i = ` + W + `.querySelector('li:not(.me) .bubble img'); return i && i.complete && i.naturalWidth === 40 && i.naturalHeight === 30; })()`
	v.waitJS("the operator's image, inline, in the visitor's window", loaded)
	if src := eval[string](v, W+`.querySelector('li:not(.me) .bubble img').src`); !strings.HasPrefix(src, e.base+"/v1/files/") || !strings.Contains(src, "sig=") {
		t.Fatalf("the window shows the operator's image from %q", src)
	}

	// A PDF, picked with the paperclip, without text: a download for the visitor.
	eval[any](op, `(() => { const dt = new DataTransfer(); dt.items.add(new File(['%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n'], 'manual.pdf', {type: 'application/pdf'}));
		const i = document.querySelector('#attach-input'); i.files = dt.files; i.dispatchEvent(new Event('change')); })()`)
	op.waitJS("the PDF uploaded", `document.querySelector('#attached span.ready') && document.querySelector('#attached').textContent.includes('manual.pdf')`)
	op.do("send it alone", chromedp.Click(chromedp.CSS("#send")))
	v.waitJS("a download in the visitor's window", `Array.from(`+W+`.querySelectorAll('li:not(.me) .bubble a[download]')).some(a => a.textContent.includes('manual.pdf'))`)
	v.shot("operator-files")
	op.shot("sent-files")

	eval[any](op, `(() => { const dt = new DataTransfer(); dt.items.add(new File(['<!doctype html><script>alert(1)</script>'], 'shot.png', {type: 'image/png'}));
		const i = document.querySelector('#attach-input'); i.files = dt.files; i.dispatchEvent(new Event('change')); })()`)
	op.waitJS("refused with a sentence", `document.querySelector('#notice.on') && document.querySelector('#notice').textContent.includes('HTML files are not taken')`)
	if eval[bool](op, `document.querySelector('#attached span.ready') !== null`) {
		t.Fatal("a refused file is shown as attached")
	}
}
