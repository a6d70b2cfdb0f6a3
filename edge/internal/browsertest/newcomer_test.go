package browsertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Issue 28, points 8 and 11: an open window's status follows the site's operators live, both
// ways, without a reload; the launcher takes the site's accent once the chat loads (the
// embed's colour drew it first) and shows a close mark while the window is open.
func TestPresenceAndLauncherLive(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Live", Widget: schema.WidgetSettings{Accent: "#0a7c3e"}})
	e.operator("lu@live.test", "Lu", "correct horse battery", site.Key)

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	if bg := eval[string](v, `getComputedStyle(`+W+`.querySelector('#l')).backgroundColor`); bg != "rgb(79, 70, 229)" {
		t.Fatalf("before the chat loads the launcher is %s, want the embed's (default) colour", bg)
	}
	v.openChat()
	sub := W + `.querySelector('.sub')`
	v.waitJS("away with nobody around", sub+`.textContent === 'Away' && !`+sub+`.classList.contains('online')`)
	v.waitJS("the launcher in the site's accent", `getComputedStyle(`+W+`.querySelector('#l')).backgroundColor === 'rgb(10, 124, 62)'`)
	closeMark := W + `.querySelector('#l path').getAttribute('d').startsWith('M6.4')`
	v.waitJS("a close mark on the launcher while open", closeMark)

	op := newTab(t, "operator")
	op.login(e.base, "lu@live.test", "correct horse battery")
	v.waitJS("online as soon as the operator is in", sub+`.textContent === 'Online' && `+sub+`.classList.contains('online')`)
	v.shot("online-live")
	op.do("log out", chromedp.Click(chromedp.CSS("#logout")))
	v.waitJS("away again once nobody is", sub+`.textContent === 'Away'`)
	v.do("close the window", chromedp.Click(chromedp.JSPath(W+`.querySelector('header button')`)))
	v.waitJS("the chat mark back", `!(`+closeMark+`)`)
	v.shot("closed")
}

// Issue 28, points 9 and 11: a right-to-left window speaks Arabic and keeps a Latin message
// in its own order; a long placeholder never grows the message box.
func TestArabicStringsAndMixedText(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Souq", Widget: schema.WidgetSettings{Language: "ar"}})
	v := newTab(t, "visitor")
	v.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.waitJS("Arabic strings", W+`.querySelector('header b').textContent === 'تحدّث معنا' && `+
		W+`.querySelector('.panel > form textarea').placeholder === 'اكتب رسالة…' && `+
		W+`.querySelector('.panel > form button[type=submit]').textContent === 'إرسال'`)
	v.typeAndSend("meine Bestellung?")
	v.waitSent("meine Bestellung?")
	v.waitJS("Arabic state and day", `Array.from(`+W+`.querySelectorAll('li.me .state')).some(s => s.textContent === 'أُرسلت') && `+W+`.querySelector('li.day').textContent === 'اليوم'`)
	if d := eval[string](v, `getComputedStyle(`+W+`.querySelector('li.me .bubble')).direction`); d != "ltr" {
		t.Fatalf("a Latin message in a right-to-left window is laid out %s; its ? would jump to the front", d)
	}
	if d := eval[string](v, `getComputedStyle(`+W+`.querySelector('.panel')).direction`); d != "rtl" {
		t.Fatalf("the window is %s", d)
	}
	v.shot("arabic")

	de := e.site(&store.Site{Name: "Laden", Widget: schema.WidgetSettings{Language: "de"}})
	g := newTab(t, "visitor-de")
	g.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	g.openDemo(e.base, de.Key)
	g.openChat()
	box := W + `.querySelector('.panel > form textarea')`
	g.waitJS("German placeholder", box+`.placeholder === 'Nachricht schreiben\u2026'`)
	g.do("type and take back", chromedp.SendKeys(chromedp.JSPath(box), "x"), chromedp.SendKeys(chromedp.JSPath(box), kb.Backspace))
	if h := eval[float64](g, box+`.getBoundingClientRect().height`); h > 46 {
		t.Fatalf("the empty message box is %v px high: its placeholder wrapped and grew it", h)
	}
	g.shot("german-composer")
}

// Issue 28, point 11: a visitor whose email the host page gave (identify) is not asked for
// it again after a reload, even before the page identifies them again.
func TestIdentifiedEmailNotAskedAgain(t *testing.T) {
	e := startEdge(t, server.Config{})
	from := (time.Now().UTC().Hour() + 3) % 24 // office hours that are not now: the window is away
	site := e.site(&store.Site{Name: "Away", Widget: schema.WidgetSettings{Hours: fmt.Sprintf("sun-sat %02d:00-%02d:00", from, from+1), AskEmail: "after"}})
	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	eval[any](v, `spookat('identify', {user_id: 'u-42', email: 'kai@example.com', name: 'Kai'})`)
	v.openChat()
	v.typeAndSend("Do you ship to Norway?")
	v.waitSent("Do you ship to Norway?")
	if eval[bool](v, W+`.querySelector('.email.on') !== null`) {
		t.Fatal("asked for an email the page gave")
	}
	v.do("reload", chromedp.Reload())
	v.waitJS("the launcher", `document.querySelector('#spookat-widget') && `+W+`.querySelector('#l')`)
	v.openChat()
	v.waitBubble("Do you ship to Norway?")
	v.waitJS("away", W+`.querySelector('.sub').textContent.startsWith('Away')`)
	if eval[bool](v, W+`.querySelector('.email.on') !== null`) {
		t.Fatal("after a reload the window asks again for the email the page gave")
	}
	v.shot("no-email-asked")
}

// Issue 28, points 12 to 14, the inbox: popups close on Escape and on a click outside, one at
// a time, focus going back where it was; messages carry short times under day headings; a
// file as the last message shows in the list; "Internal note" is unticked after a note; the
// live mark is readable; on a phone the top bar is one line and the composer and Send stay on
// screen however the conversation is scrolled.
func TestInboxPopupsTimesAndPhone(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Desk"})
	e.operator("dee@desk.test", "Dee", "correct horse battery", site.Key)
	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	v.openChat()
	for i := 1; i <= 25; i++ {
		v.pasteAndSend(fmt.Sprintf("Question number %d about my order", i))
	}
	v.waitSent("Question number 25 about my order")
	v.paste(screenshot)
	v.waitJS("the picture sent", W+`.querySelector('li.me .state[data-state=sent]') && `+W+`.querySelectorAll('li.me img').length === 1 && `+
		`Array.from(`+W+`.querySelectorAll('li.me')).pop().querySelector('.state[data-state=sent]')`)

	op := newTab(t, "operator")
	op.login(e.base, "dee@desk.test", "correct horse battery")
	op.waitJS("the file named in the list", `document.querySelector('#conversations li[data-id] .last').textContent === '\ud83d\udcce image.png'`)
	if fs := eval[float64](op, `parseFloat(getComputedStyle(document.querySelector('#live')).fontSize)`); fs < 12 ||
		eval[string](op, `getComputedStyle(document.querySelector('#live')).backgroundColor`) == "rgba(0, 0, 0, 0)" {
		t.Fatalf("the live mark is %v px without a background", fs)
	}
	op.openFirstConversation()
	op.waitJS("a day heading and short times", `document.querySelector('#messages li.day').textContent === 'Today' && `+
		`document.querySelector('#messages .msg.visitor .meta time').textContent === 'just now' && `+
		`!/\d{4}/.test(document.querySelector('#messages .msg.visitor .meta').textContent)`)

	op.do("tick Internal note", chromedp.Click(chromedp.CSS("#internal")))
	op.do("write a note", chromedp.SendKeys(chromedp.CSS("#reply"), "Check the warehouse first"), chromedp.Click(chromedp.CSS("#send")))
	op.waitJS("the note", `document.querySelector('#messages .msg.note')`)
	op.waitJS("Internal note unticked for the next reply", `document.querySelector('#internal').checked === false && !document.querySelector('form.reply.internal')`)

	// Popups: one at a time; Escape and a click outside close them; focus goes back.
	op.do("open the snooze menu", chromedp.Click(chromedp.CSS("#conv-snooze summary")))
	op.waitJS("the snooze menu", `document.querySelector('#conv-snooze').open`)
	op.do("focus the list", chromedp.Focus(chromedp.CSS(`#conversations li[data-id] a`)))
	op.do("?", chromedp.KeyEvent("?"))
	op.waitJS("the shortcuts alone", `document.querySelector('#keys') && !document.querySelector('#conv-snooze').open`)
	op.do("Escape", chromedp.KeyEvent(kb.Escape))
	op.waitJS("closed by Escape, focus back on the list", `!document.querySelector('#keys') && document.activeElement === document.querySelector('#conversations li[data-id] a')`)
	op.do("open the alerts", chromedp.Click(chromedp.CSS("#notify-link")))
	op.waitJS("the alerts", `document.querySelector('#alerts')`)
	op.do("click outside", chromedp.MouseClickXY(600, 400))
	op.waitJS("closed by the click outside", `!document.querySelector('#alerts') && document.querySelector('#notify-link').getAttribute('aria-expanded') === 'false'`)
	op.do("open the snooze menu again", chromedp.Click(chromedp.CSS("#conv-snooze summary")))
	op.do("Escape", chromedp.KeyEvent(kb.Escape))
	op.waitJS("the snooze menu closed by Escape, focus on its button", `!document.querySelector('#conv-snooze').open && document.activeElement === document.querySelector('#conv-snooze summary')`)
	op.do("close the conversation", chromedp.Click(chromedp.CSS("#conv-toggle")))
	op.waitJS("closed (nothing stale in the way)", `document.querySelector('#conv-status').textContent === 'closed'`)
	op.shot("desktop")

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "dee@desk.test", "correct horse battery")
	phone.do("show every conversation", chromedp.Click(chromedp.CSS(`button[data-filter=all]`)))
	phone.openFirstConversation()
	phone.waitJS("the conversation", `document.querySelectorAll('#messages .msg.visitor').length >= 25`)
	onScreen := `(() => { const h = innerHeight, top = document.querySelector('.top').getBoundingClientRect(),
		send = document.querySelector('#send').getBoundingClientRect(), reply = document.querySelector('#reply').getBoundingClientRect();
		return top.top >= 0 && top.height <= 56 && send.top >= 0 && send.bottom <= h && reply.bottom <= h && document.scrollingElement.scrollTop === 0; })()`
	phone.waitJS("one-line top bar, composer and Send on screen", onScreen)
	eval[any](phone, `document.querySelector('#messages').scrollTop = 0`)
	phone.waitJS("still so, scrolled to the top", onScreen)
	phone.shot("phone-conversation")
}
