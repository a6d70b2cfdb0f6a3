package browsertest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/edge/internal/widget"
	"spookat/schema"
)

// The host page's API, called before the launcher loads (the queue) and after: on('open'|
// 'close'|'message'|'unread'), open, send, close, shutdown. A shut-down visitor starts over
// with a new token and an empty window; the old conversation is not shown.
func TestHostPageAPI(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Host"})
	e.operator("hana@host.test", "Hana", "correct horse battery", site.Key)
	tok := e.apiToken("hana@host.test", "correct horse battery")

	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Shop</title></head><body><h1>Shop</h1>
<script>
window.spookat = window.spookat || function () { (spookat.q = spookat.q || []).push(arguments); };
window.got = [];
spookat('on', 'open', function () { got.push('open'); });
spookat('on', 'close', function () { got.push('close'); });
spookat('on', 'message', function (m) { got.push('message:' + m.author + ':' + m.text); });
spookat('on', 'unread', function (n) { got.push('unread:' + n); });
</script>
<script src="%s/widget.js" data-site="%s" data-position="left" data-color="#0a7c3e" async></script></body></html>`, e.base, site.Key)
	}))
	t.Cleanup(host.Close)

	v := newTab(t, "visitor")
	v.do("open the host page", chromedp.Navigate(host.URL))
	v.waitJS("the launcher", `document.querySelector('#spookat-widget') && `+W+`.querySelector('#l')`)
	// The embed's corner and colour, before any request for the chat.
	if eval[bool](v, `(() => { const l = `+W+`.querySelector('#l'); return l.getBoundingClientRect().left > 40 ||
		getComputedStyle(l).backgroundColor !== 'rgb(10, 124, 62)'; })()`) {
		t.Fatal("the launcher is not in the left corner in the embed's colour")
	}
	eval[any](v, `spookat('open')`)
	v.waitJS("opened by the API", W+`.querySelector('.panel.open') && got.includes('open')`)
	if x := eval[float64](v, W+`.querySelector('.panel').getBoundingClientRect().left`); x > 40 {
		t.Fatalf("the window opened %v px from the left, away from its launcher", x)
	}
	eval[any](v, `spookat('send', 'Sent from the page')`)
	v.waitSent("Sent from the page")
	eval[any](v, `spookat('close')`)
	v.waitJS("closed by the API", W+`.querySelector('.panel.open') === null && got.includes('close')`)

	var list struct {
		Conversations []store.ConversationSummary `json:"conversations"`
	}
	e.api("GET", "/sites/"+site.Key+"/conversations", tok, nil, &list)
	if len(list.Conversations) != 1 {
		t.Fatalf("conversations: %+v", list)
	}
	path := "/conversations/" + strconv.FormatInt(list.Conversations[0].ID, 10) + "/messages"
	if st := e.api("POST", path, tok, map[string]string{"text": "Thanks, seen it"}, nil); st != http.StatusCreated {
		t.Fatalf("reply: %d", st)
	}
	v.waitJS("the message and unread events", `got.includes('message:operator:Thanks, seen it') && got.includes('unread:1')`)

	token := eval[string](v, `JSON.parse(localStorage.getItem('spookat:`+site.Key+`')).token`)
	// A second tab of the same browser, the conversation open in it too.
	v2 := v.sameContextTab("visitor-tab-2")
	v2.do("open the host page", chromedp.Navigate(host.URL))
	v2.waitJS("the conversation in the second tab", `window.spookat && (spookat('open'), true) && `+bubbleCount("Thanks, seen it")+` === 1`)
	eval[any](v, `spookat('shutdown')`)
	v2.waitJS("the second tab forgot the visitor too", bubbleCount("Thanks, seen it")+` === 0`)
	if eval[bool](v, `localStorage.getItem('spookat:`+site.Key+`') !== null`) {
		t.Fatal("shutdown kept the visitor in localStorage")
	}
	eval[any](v2, `spookat('open')`) // it connects again, as a new visitor
	v2.waitJS("a new token from the second tab", `(JSON.parse(localStorage.getItem('spookat:`+site.Key+`') || '{}').token || '') !== ''`)
	if now := eval[string](v2, `JSON.parse(localStorage.getItem('spookat:`+site.Key+`')).token`); now == token {
		t.Fatal("the second tab wrote the shut-down visitor's token back")
	}
	eval[any](v, `spookat('open')`)
	v.waitJS("a new visitor token", `(JSON.parse(localStorage.getItem('spookat:`+site.Key+`') || '{}').token || '') !== ''`)
	if now := eval[string](v, `JSON.parse(localStorage.getItem('spookat:`+site.Key+`')).token`); now == token {
		t.Fatal("shutdown kept the visitor's token")
	}
	if n := eval[int](v, bubbleCount("Thanks, seen it")+` + `+bubbleCount("Sent from the page")); n != 0 {
		t.Fatalf("after shutdown the window still shows %d of the old conversation's messages", n)
	}
	if eval[bool](v, W+`.querySelector('.badge.on') !== null`) {
		t.Fatal("after shutdown the badge stays")
	}
	v.shot("after-shutdown")
}

// Identity verification in two browser contexts (a laptop and a phone, each with its own
// visitor token): the same signed user sees one conversation, history and live; a page whose
// user_hash is forged keeps its own.
func TestIdentifyAcrossBrowsers(t *testing.T) {
	e := startEdge(t, server.Config{})
	const secret = "browser-test-identity-secret"
	site := e.site(&store.Site{Name: "Ident", IdentitySecret: secret})
	hash := widget.UserHash(secret, "cust-9")
	identify := `spookat('identify', {user_id: 'cust-9', email: 'nia@example.com', name: 'Nia', user_hash: ` + js(hash) + `})`

	laptop := newTab(t, "laptop")
	laptop.openDemo(e.base, site.Key)
	eval[any](laptop, identify)
	laptop.openChat()
	laptop.typeAndSend("Started on my laptop")
	laptop.waitSent("Started on my laptop")

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	phone.openDemo(e.base, site.Key)
	eval[any](phone, identify)
	phone.openChat()
	phone.waitBubble("Started on my laptop")
	phone.typeAndSend("Continued on my phone")
	phone.waitSent("Continued on my phone")
	laptop.waitBubble("Continued on my phone")
	phone.shot("one-conversation")

	forger := newTab(t, "forger")
	forger.openDemo(e.base, site.Key)
	eval[any](forger, `spookat('identify', {user_id: 'cust-9', user_hash: '`+strings.Repeat("ab", 32)+`'})`)
	forger.openChat()
	forger.typeAndSend("Let me in") // sent after the identify: answered after it
	forger.waitSent("Let me in")
	if n := eval[int](forger, bubbleCount("Started on my laptop")+` + `+bubbleCount("Continued on my phone")); n != 0 {
		t.Fatalf("a forged user_hash shows the user's conversation (%d messages)", n)
	}
}

// Languages: a site set to German shows German strings (one overridden by the site), dates
// and states included; an embed with data-lang="ar" lays the window out right to left
// (English strings: the table has no Arabic).
func TestGermanAndRightToLeft(t *testing.T) {
	e := startEdge(t, server.Config{})
	de := e.site(&store.Site{Name: "Laden", Widget: schema.WidgetSettings{Language: "de", Strings: map[string]string{"send": "Los"}}})
	v := newTab(t, "visitor-de")
	v.openDemo(e.base, de.Key)
	v.openChat()
	v.waitJS("German strings", W+`.querySelector('header b').textContent === 'Schreiben Sie uns' && `+
		W+`.querySelector('.panel > form textarea').placeholder === 'Nachricht schreiben\u2026' && `+
		W+`.querySelector('.panel > form button[type=submit]').textContent === 'Los'`)
	v.typeAndSend("Hallo, ist jemand da?")
	v.waitJS("Gesendet", `Array.from(`+W+`.querySelectorAll('li.me .state')).some(s => s.textContent === 'Gesendet')`)
	v.waitJS("Heute", W+`.querySelector('li.day').textContent === 'Heute'`)
	v.do("close", chromedp.Click(chromedp.JSPath(W+`.querySelector('header button')`)))
	v.waitJS("the launcher in German", W+`.querySelector('#l').getAttribute('aria-label') === 'Chat \u00f6ffnen'`)
	if l := eval[string](v, W+`.querySelector('.panel').getAttribute('lang')`); l != "de" {
		t.Fatalf("the window's lang is %q", l)
	}

	site := e.site(&store.Site{Name: "RTL"})
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html dir="rtl" lang="ar"><head><title>متجر</title></head><body><h1>متجر</h1>
<script src="%s/widget.js" data-site="%s" data-lang="ar" async></script></body></html>`, e.base, site.Key)
	}))
	t.Cleanup(host.Close)
	r := newTab(t, "visitor-rtl")
	r.do("open the page", chromedp.Navigate(host.URL))
	r.waitJS("the launcher", `document.querySelector('#spookat-widget') && `+W+`.querySelector('#l')`)
	r.openChat()
	r.typeAndSend("مرحبا")
	r.waitSent("مرحبا")
	if d := eval[string](r, `getComputedStyle(`+W+`.querySelector('.panel')).direction`); d != "rtl" {
		t.Fatalf("the window's direction is %s", d)
	}
	if eval[bool](r, `(() => { const p = `+W+`.querySelector('.panel').getBoundingClientRect(), b = `+W+`.querySelector('li.me .bubble').getBoundingClientRect(); return b.left - p.left > p.right - b.right; })()`) {
		t.Fatal("right to left, the visitor's own bubble should sit on the left")
	}
	r.shot("rtl")
	v.shot("de")
}
