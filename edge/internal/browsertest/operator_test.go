package browsertest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// Issue 13, point 1: the operator sees who they answer. Beside the conversation: the page the
// visitor is on (and, once they move on, where they started), the browser, the language and
// their local time; a single-page site's navigation reaches the open inbox live.
func TestVisitorContextInInbox(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Context"})
	e.operator("cora@ctx.test", "Cora", "correct horse battery", site.Key)

	v := newTab(t, "visitor")
	if _, err := chromedp.Call(v.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "America/Sao_Paulo"}); err != nil {
		t.Fatal(err)
	}
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.typeAndSend("Do you ship to Brazil?")
	v.waitSent("Do you ship to Brazil?")

	op := newTab(t, "operator")
	op.login(e.base, "cora@ctx.test", "correct horse battery")
	op.openFirstConversation()
	op.waitJS("the page the visitor is on", `document.querySelector('#info-now a') && document.querySelector('#info-now a').textContent === 'spookat demo'`)
	if href := eval[string](op, `document.querySelector('#info-now a').href`); !strings.HasPrefix(href, e.base+"/demo?site=") {
		t.Fatalf("the page links to %q", href)
	}
	if b := eval[string](op, `document.querySelector('#info-browser dd').textContent`); !strings.Contains(b, "Chrome") || !strings.HasSuffix(b, "on Linux") {
		t.Fatalf("browser %q", b)
	}
	if tz := eval[string](op, `document.querySelector('#info-time dd').textContent`); !strings.Contains(tz, "(America/Sao_Paulo)") {
		t.Fatalf("local time %q", tz)
	}
	if eval[bool](op, `!!document.querySelector('#info-started')`) {
		t.Fatal("'Started on' is shown while the visitor is still on the page they started on")
	}

	// The site's own navigation, without a load: the inbox follows, and says where it began.
	eval[any](v, `history.pushState({}, '', '/demo/pricing?site=`+site.Key+`'); document.title = 'Pricing'`)
	op.waitJS("the new page, live", `document.querySelector('#info-now a').textContent === 'Pricing'`)
	op.waitJS("where it started", `document.querySelector('#info-started a') && document.querySelector('#info-started a').textContent === 'spookat demo'`)
	op.noReload()
	op.shot("context")
}

// Issue 13, point 7: the inbox without a mouse and on a phone. The list is links (Tab,
// Enter); j / k move through it and open; r goes to the reply, Ctrl+Enter sends, Escape goes
// back to the list, e closes; an error is said in the page, never in an alert. At 390 px the
// list and the conversation are one pane each, with a way back, and nothing overflows. The
// audit (axe-core, WCAG 2.1 A/AA) finds nothing serious on the login page, the list and a
// conversation, desktop and phone.
func TestInboxKeyboardPhoneAndAudit(t *testing.T) {
	e := startEdge(t, server.Config{})
	src := axeSource(t)
	site := e.site(&store.Site{Name: "Keys"})
	e.operator("kim@keys.test", "Kim", "correct horse battery", site.Key)
	for i, text := range []string{"First visitor here", "Second visitor here"} {
		c, err := edgetest.DialVisitor(e.edge.Addr, site.Key, e.base)
		testkit.NoErr(t, err)
		defer c.WS.Close()
		if _, err := c.SendAck("k"+strconv.Itoa(i), text); err != nil {
			t.Fatal(err)
		}
	}

	op := newTab(t, "operator")
	op.do("open the inbox", chromedp.Navigate(e.base+"/app/"), chromedp.WaitVisible(chromedp.CSS("#email")))
	op.requireAccessible(src, "login")
	op.login(e.base, "kim@keys.test", "correct horse battery")
	eval[any](op, `window.__alerts = 0; window.alert = () => { window.__alerts++ }`)
	op.waitJS("two conversations, as links", `document.querySelectorAll('#conversations li[data-id] a[href^="#/conversations/"]').length === 2`)
	top := eval[string](op, `document.querySelector('#conversations li[data-id]').getAttribute('data-id')`)
	second := eval[string](op, `document.querySelectorAll('#conversations li[data-id]')[1].getAttribute('data-id')`)
	key := func(what, k string) { op.do(what, chromedp.KeyEvent(k)) }
	key("j", "j")
	op.waitJS("j opens the first", `location.hash === '#/conversations/`+top+`' && document.querySelector('#reply')`)
	key("j again", "j")
	op.waitJS("j opens the next", `location.hash === '#/conversations/`+second+`' && document.activeElement.getAttribute('href') === '#/conversations/`+second+`'`)
	key("k", "k")
	op.waitJS("k goes back", `location.hash === '#/conversations/`+top+`' && document.querySelector('#messages .msg.visitor')`)
	op.requireAccessible(src, "conversation")
	key("r", "r")
	op.waitJS("r: the reply box", `document.activeElement === document.querySelector('#reply')`)
	op.do("write and send", chromedp.SendKeys(chromedp.CSS("#reply"), "Typed without a mouse"),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	op.waitJS("sent", `Array.from(document.querySelectorAll('#messages .msg.operator .text')).some(e => e.textContent === 'Typed without a mouse')`)
	op.waitJS("the list follows", `document.querySelector('#conversations li[data-id="`+top+`"] .last').textContent === 'You: Typed without a mouse'`)
	op.do("Escape", chromedp.SendKeys(chromedp.CSS("#reply"), kb.Escape))
	op.waitJS("back on the list", `document.activeElement.getAttribute('href') === '#/conversations/`+top+`'`)
	key("e", "e")
	op.waitJS("e closes", `document.querySelector('#conv-status').textContent === 'closed'`)
	op.waitJS("the open list without it", `!document.querySelector('#conversations li[data-id="`+top+`"]')`)

	// A failed action is said in the page (here the server answers 503 once).
	eval[any](op, `(() => { const f = window.fetch; window.fetch = (u, o) => { window.fetch = f;
		return Promise.resolve(new Response(JSON.stringify({code: 'unavailable', message: 'The server is busy; try again in a moment.'}), {status: 503})); }; })()`)
	key("e, failing", "e")
	op.waitJS("the error, inline", `document.querySelector('#notice.on') && document.querySelector('#notice').textContent === 'The server is busy; try again in a moment.'`)
	if n := eval[int](op, `window.__alerts`); n != 0 {
		t.Fatalf("%d alert dialogs", n)
	}
	key("?", "?")
	op.waitJS("the shortcuts", `document.querySelector('#keys') && document.activeElement === document.querySelector('#keys button')`)
	op.shot("keyboard")

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "kim@keys.test", "correct horse battery")
	phone.waitJS("the list, alone", `document.querySelector('#conversations li[data-id]') && getComputedStyle(document.querySelector('#main')).display === 'none'`)
	overflow := `document.documentElement.scrollWidth - document.documentElement.clientWidth + document.querySelector('.top').scrollWidth - document.querySelector('.top').clientWidth`
	if n := eval[float64](phone, overflow); n > 0 {
		t.Fatalf("the list overflows a 390 px screen by %v px", n)
	}
	phone.requireAccessible(src, "phone list")
	phone.shot("phone-list")
	phone.openFirstConversation()
	phone.waitJS("the conversation, alone", `document.querySelector('#messages .msg') && getComputedStyle(document.querySelector('nav.side')).display === 'none'`)
	if n := eval[float64](phone, overflow); n > 0 {
		t.Fatalf("the conversation overflows a 390 px screen by %v px", n)
	}
	phone.requireAccessible(src, "phone conversation")
	phone.shot("phone-conversation")
	phone.do("back", chromedp.Click(chromedp.CSS(".head .back")))
	phone.waitJS("the list again", `getComputedStyle(document.querySelector('nav.side')).display !== 'none' && getComputedStyle(document.querySelector('#main')).display === 'none'`)
}

// Issue 13, point 6: an operator looking elsewhere hears of visitors. Alerts are asked for
// on a click (the browser's permission prompt comes then, never on load) and kept for this
// operator in this browser; a new conversation on one of the operator's sites gives a desktop
// notification naming the site, with the text, and a sound; the tab's title counts the
// conversations with unread messages; the conversation the operator is reading gives none.
func TestOperatorNotifications(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Bells"})
	e.operator("bo@bells.test", "Bo", "correct horse battery", site.Key)
	op := newTab(t, "operator")
	op.login(e.base, "bo@bells.test", "correct horse battery")
	// The browser's notifications and audio, recorded: headless Chromium shows neither.
	fakes := `window.__notes = []; window.__asked = 0; window.__beeps = 0;
		window.Notification = function (title, o) { window.__notes.push({title: title, body: o.body, tag: o.tag}); this.close = () => {}; };
		Notification.permission = 'default';
		Notification.requestPermission = () => { window.__asked++; Notification.permission = 'granted'; return Promise.resolve('granted'); };
		window.AudioContext = function () { return {currentTime: 0, destination: {}, close() {}, createGain: () => ({gain: {}, connect() {}}),
			createOscillator: () => ({frequency: {}, connect() {}, start() { window.__beeps++ }, stop() {}})}; };`
	eval[any](op, fakes)
	if n := eval[int](op, `window.__asked`); n != 0 {
		t.Fatal("notification permission asked before any click")
	}
	op.do("open the alerts", chromedp.Click(chromedp.CSS("#notify-link")))
	op.do("desktop notifications", chromedp.Click(chromedp.CSS("#notify-desktop")))
	op.waitJS("asked, granted", `window.__asked === 1 && document.querySelector('#notify-desktop').checked && /notified/.test(document.querySelector('#alerts-msg').textContent)`)
	op.do("a sound", chromedp.Click(chromedp.CSS("#notify-sound")))
	op.waitJS("a sample of it", `window.__beeps === 1`)
	op.shot("alerts")
	op.do("close the panel", chromedp.Click(chromedp.CSS("#alerts button")))

	c, err := edgetest.DialVisitor(e.edge.Addr, site.Key, e.base)
	testkit.NoErr(t, err)
	defer c.WS.Close()
	ack, err := c.SendAck("n1", "Is anyone awake?")
	testkit.NoErr(t, err)
	op.waitJS("a notification", `window.__notes.length === 1 && window.__notes[0].title === 'New conversation on Bells' && window.__notes[0].body === 'Is anyone awake?'`)
	op.waitJS("and a sound", `window.__beeps === 2`)
	op.waitJS("the title counts it", `document.title === '(1) spookat inbox'`)

	// Reading it: the title drops the count, and its next message notifies nobody.
	op.openFirstConversation()
	op.waitJS("read", `location.hash === '#/conversations/`+strconv.FormatInt(*ack.ConversationID, 10)+`' && document.title === 'spookat inbox'`)
	c.Message(t, "n2", "Hello?") // the visitor's socket hears "seen" too: the ack is not the next frame
	op.waitJS("the message, shown", `Array.from(document.querySelectorAll('#messages .msg.visitor .text')).some(e => e.textContent === 'Hello?')`)
	if n := eval[int](op, `window.__notes.length + window.__beeps`); n != 3 {
		t.Fatalf("the conversation being read notified (%d notifications and sounds, want 3 from before)", n)
	}

	// Kept for this operator: after a reload the boxes are still ticked.
	op.do("reload", chromedp.Reload())
	op.waitJS("the inbox again", `document.querySelector('#notify-link')`)
	op.do("open the alerts", chromedp.Click(chromedp.CSS("#notify-link")))
	op.waitJS("still on", `document.querySelector('#notify-desktop').checked && document.querySelector('#notify-sound').checked`)
}
