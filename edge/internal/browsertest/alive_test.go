package browsertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// sameContextTab opens another tab in b's browser context: same localStorage, as a visitor's
// second tab of the same site.
func (b *Tab) sameContextTab(name string) *Tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("open tab %s: %v", name, err)
	}
	return &Tab{t: b.t, name: name, ctx: ctx}
}

// hide makes the page report itself hidden, as when its tab is in the background (a headless
// browser's tabs are all visible), and tells it so.
func (b *Tab) hide(hidden bool) {
	b.t.Helper()
	v := "false"
	if hidden {
		v = "true"
	}
	eval[any](b, `Object.defineProperty(document, 'hidden', {configurable: true, get: () => `+v+`}); document.dispatchEvent(new Event('visibilitychange'))`)
}

// The conversation is alive on both sides: "Seen" and typing both ways; a reply that comes
// while the window is closed shows as a badge and a preview on the launcher and, in a hidden
// tab, in the title; a returning visitor's page connects at once and shows what is unread;
// reading in one tab clears the other's badge; messages carry times under a day heading.
func TestUnreadTypingAndSeen(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Alive"})
	e.operator("omar@alive.test", "Omar", "correct horse battery", site.Key)

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.typeAndSend("Is my parcel on its way?")
	v.waitSent("Is my parcel on its way?")
	v.waitJS("a day heading and a time", W+`.querySelector('ol li.day').textContent === 'Today' && `+
		W+`.querySelector('li.me time').textContent === 'just now'`)

	op := newTab(t, "operator")
	op.login(e.base, "omar@alive.test", "correct horse battery")
	op.openFirstConversation()
	op.waitJS("the visitor's message", `document.querySelector('#messages .msg.visitor')`)

	// The operator read it: Seen.
	v.waitJS("Seen under the message", W+`.querySelector('li.me .state[data-seen]') && `+W+`.querySelector('li.me .state').textContent === 'Seen'`)
	// Operator typing shows in the widget.
	op.do("type a reply", chromedp.SendKeys(chromedp.CSS("#reply"), "Let me check"))
	v.waitJS("Omar is typing", W+`.querySelector('.typing.on') && `+W+`.querySelector('.typing').textContent === 'Omar is typing\u2026'`)
	v.shot("operator-typing")
	// Visitor typing shows in the inbox.
	v.do("type", chromedp.SendKeys(chromedp.JSPath(W+`.querySelector('.panel > form textarea')`), "It was due on Monday"))
	op.waitJS("the visitor is typing", `document.querySelector('#typing').textContent === 'The visitor is typing\u2026'`)
	op.shot("visitor-typing")

	// The visitor closes the window and puts the tab in the background; the reply comes.
	v.do("close the window", chromedp.Click(chromedp.JSPath(W+`.querySelector('header button')`)))
	v.hide(true)
	op.do("send the reply", chromedp.Click(chromedp.CSS("#send")))
	// Badge, preview and title while closed.
	v.waitJS("the badge", W+`.querySelector('.badge.on') && `+W+`.querySelector('.badge').textContent === '1'`)
	v.waitJS("the preview", W+`.querySelector('.preview.on p').textContent === 'Let me check'`)
	if l := eval[string](v, W+`.querySelector('#l').getAttribute('aria-label')`); l != "Open chat, 1 unread" {
		t.Fatalf("launcher label %q", l)
	}
	v.waitJS("the title count", `document.title.startsWith('(1) ')`)
	if eval[bool](v, W+`.querySelector('.typing.on') !== null`) {
		t.Fatal("the typing note stayed after the operator's message came")
	}
	v.hide(false)
	v.waitJS("the title back", `!document.title.startsWith('(')`)
	v.shot("badge")

	// A returning visitor's page shows the unread reply at once.
	v.do("reload", chromedp.Reload())
	v.waitJS("the badge without any intent", `document.querySelector('#spookat-widget') && `+W+`.querySelector('.badge.on') && `+W+`.querySelector('.badge').textContent === '1'`)
	if eval[bool](v, W+`.querySelector('.panel.open') !== null`) {
		t.Fatal("the window opened by itself")
	}

	v2 := v.sameContextTab("visitor-tab-2")
	v2.openDemo(e.base, site.Key)
	v2.waitJS("the badge in the second tab", W+`.querySelector('.badge.on')`)
	// Reading clears the badge everywhere and tells the operator.
	v.openChat()
	v.waitJS("the reply shown", bubbleCount("Let me check")+` === 1`)
	if eval[bool](v, W+`.querySelector('.badge.on') !== null`) {
		t.Fatal("the badge stays with the window open")
	}
	v2.waitJS("the second tab's badge gone", W+`.querySelector('.badge.on') === null`)
	op.waitJS("Seen in the inbox", `(() => { const s = document.querySelector('#messages li.msg.operator .seen'); return s && s.textContent === 'Seen'; })()`)
	op.shot("seen")
	if title := eval[string](v, `document.title`); strings.HasPrefix(title, "(") {
		t.Fatalf("title %q keeps a count after reading", title)
	}
}

// A site's window says who answers and when: its title, colour and greeting; outside office
// hours it is away, says so, and asks for the visitor's email in the composer before the first
// message (ask_email "before"), which is saved with that message and confirmed. A site whose
// operator has the inbox open says online.
func TestAwaySiteAsksEmailInOneComposer(t *testing.T) {
	e := startEdge(t, server.Config{})
	from := (time.Now().UTC().Hour() + 3) % 24 // an hour of office hours that is not now
	hours := fmt.Sprintf("sun-sat %02d:00-%02d:00", from, from+1)
	away := e.site(&store.Site{Name: "Acme", Widget: schema.WidgetSettings{Title: "Acme help", Accent: "#0a7c3e",
		Greeting: "Hi! Ask us about your order.", Hours: hours, AskEmail: "before",
		AwayMessage: "We are back at 9. Leave your email and we will write."}})
	online := e.site(&store.Site{Name: "Open shop"})
	e.operator("ola@open.test", "Ola", "correct horse battery", online.Key)

	v := newTab(t, "visitor")
	v.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	v.openDemo(e.base, away.Key)
	v.openChat()
	v.waitJS("the site's title and away", W+`.querySelector('header b').textContent === 'Acme help' && `+W+`.querySelector('.sub').textContent.startsWith('Away \u00b7 back ')`)
	v.waitJS("the greeting and the away message", W+`.querySelector('li.greet .bubble').textContent === 'Hi! Ask us about your order.' && `+
		W+`.querySelector('li.greet .state').textContent.startsWith('We are back at 9')`)
	if bg := eval[string](v, `getComputedStyle(`+W+`.querySelector('header')).backgroundColor`); bg != "rgb(10, 124, 62)" {
		t.Fatalf("header colour %s, want the site's accent", bg)
	}
	v.waitJS("the email asked before the first message", W+`.querySelector('.email.on input')`)
	v.shot("away")
	v.do("type the email", chromedp.SendKeys(chromedp.JSPath(W+`.querySelector('.email input')`), "pat@example.com"))
	v.typeAndSend("Where is order 1042?")
	v.waitSent("Where is order 1042?")
	v.waitJS("the confirmation", W+`.querySelector('.emailok.on').textContent === 'Thanks! We\u2019ll email you at pat@example.com if you leave.'`)
	if eval[bool](v, W+`.querySelector('.email.on') !== null`) {
		t.Fatal("the email row stays after the email is saved")
	}
	if eval[bool](v, W+`.querySelector('li.greet') === null`) {
		t.Fatal("the greeting went with the first message")
	}
	v.shot("email-saved")
	db := edgetest.OpenDB(t, e.edge.DataDir)
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM visitors WHERE email = 'pat@example.com' AND site_id = ?`, away.ID); n != 1 {
		t.Fatalf("visitors with the email: %d", n)
	}

	op := newTab(t, "operator")
	op.login(e.base, "ola@open.test", "correct horse battery")
	v2 := newTab(t, "visitor-2")
	v2.openDemo(e.base, online.Key)
	v2.openChat()
	v2.waitJS("online", W+`.querySelector('.sub.online') && `+W+`.querySelector('.sub').textContent === 'Online'`)
	v2.waitJS("no email asked while online", W+`.querySelector('.email.on') === null`)
	v2.shot("online")
}

// A closed conversation asks the visitor for a rating: they pick "bad" and say why; the
// operator sees it live in the inbox's header and as a message in the conversation (which the
// site's targets get like any message); the visitor asks for the conversation by email; it is
// stored once, and a reload shows the thanks.
func TestRatingAfterClose(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Rated"})
	e.operator("rui@rated.test", "Rui", "correct horse battery", site.Key)

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	eval[any](v, `spookat('identify', {user_id: 'cust-7', email: 'ada@example.com'})`) // the address the transcript goes to
	v.openChat()
	v.typeAndSend("My refund never came")
	v.waitSent("My refund never came")

	op := newTab(t, "operator")
	op.login(e.base, "rui@rated.test", "correct horse battery")
	op.openFirstConversation()
	op.waitJS("the message", `document.querySelector('#messages .msg.visitor')`)
	op.do("close it", chromedp.Click(chromedp.CSS("#conv-toggle")))

	v.waitJS("the rating card", W+`.querySelector('li.rate .rbtn[data-rating=bad]')`)
	v.do("pick bad", chromedp.Click(chromedp.JSPath(W+`.querySelector('li.rate .rbtn[data-rating=bad]')`)))
	v.do("say why", chromedp.SendKeys(chromedp.JSPath(W+`.querySelector('li.rate textarea')`), "Nobody answered my question"))
	v.shot("rating")
	v.do("send the rating", chromedp.Click(chromedp.JSPath(W+`.querySelector('li.rate .rsend')`)))
	v.waitJS("the thanks", W+`.querySelector('li.rate .bubble').textContent === 'Thanks for your feedback!'`)
	// The closed conversation by email, at the address the visitor left.
	v.do("ask for the transcript", chromedp.Click(chromedp.JSPath(W+`.querySelector('li.rate .tx')`)))
	// Stored is not sent: the window says it is on its way until the worker's result says
	// how it ended (no mail relay here: the worker gives up).
	v.waitJS("on its way", W+`.querySelector('li.rate .txok') && `+W+`.querySelector('li.rate .txok').textContent === 'On its way to ada@example.com.'`)
	v.shot("transcript-on-its-way")
	op.waitJS("the request in the conversation", `Array.from(document.querySelectorAll('#messages .msg .text')).some(e => e.textContent === 'Transcript emailed to ada@example.com')`)
	tx := edgetest.QueryInt(t, edgetest.OpenDB(t, e.edge.DataDir), `SELECT id FROM messages WHERE kind = 'transcript'`)
	e.result(schema.Result{Target: schema.TargetEmail, SiteID: site.ID, MessageID: tx, Status: schema.StatusDead, Attempts: 8, Error: "dial tcp: connection refused"})
	v.waitJS("could not be sent, offered again", W+`.querySelector('li.rate .txfail').textContent === 'We could not send it to ada@example.com.' && `+W+`.querySelector('li.rate .tx:not([disabled])')`)
	v.shot("transcript-failed")
	e.result(schema.Result{Target: schema.TargetEmail, SiteID: site.ID, MessageID: tx, Status: schema.StatusDelivered, Attempts: 9})
	v.waitJS("sent", W+`.querySelector('li.rate .txok') && `+W+`.querySelector('li.rate .txok').textContent === 'Sent to ada@example.com.'`)
	v.shot("transcript-sent")

	op.waitJS("the rating in the header", `document.querySelector('#conv-rating').textContent.includes('rated bad') && document.querySelector('#conv-rating').title === 'Nobody answered my question'`)
	op.waitJS("the rating in the conversation", `Array.from(document.querySelectorAll('#messages .msg .text')).some(e => e.textContent.startsWith('Rated the conversation: bad'))`)
	op.shot("rated")

	db := edgetest.OpenDB(t, e.edge.DataDir)
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE rating = 'bad' AND rating_comment = 'Nobody answered my question' AND site_id = ?`, site.ID); n != 1 {
		t.Fatalf("rated conversations: %d", n)
	}
	v.do("reload", chromedp.Reload())
	v.waitJS("the launcher", `document.querySelector('#spookat-widget') && `+W+`.querySelector('#l')`)
	v.openChat()
	v.waitJS("the thanks after a reload, no second card", W+`.querySelectorAll('li.rate').length === 1 && `+W+`.querySelector('li.rate .bubble').textContent === 'Thanks for your feedback!'`)
}
