package browsertest

import (
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// Issue 34, point 2: Ann adds a canned reply in the site's settings; Bob, in a conversation,
// types / and a few letters, picks it with the keyboard and gets its text with the
// placeholders filled in; Ann edits it and Bob's open list shows the new text without a
// reload. On a phone the list fits above the composer.
func TestCannedReplyInsertedWithSlash(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Answers"})
	const pw = "correct horse battery"
	e.operator("ann@answers.test", "Ann Lee", pw, site.Key)
	e.operator("bob@answers.test", "Bob Stone", pw, site.Key)
	v := edgetest.Dial(t, e.edge.Addr, site.Key, "")
	_, err := v.SendAck("v-1", "Can I get my money back?")
	testkit.NoErr(t, err)

	ann := newTab(t, "ann")
	ann.login(e.base, "ann@answers.test", pw)
	ann.do("open the settings", chromedp.Navigate(e.base+"/app/#/sites/"+strconv.FormatInt(site.ID, 10)+"/settings"),
		chromedp.WaitVisible(chromedp.CSS("#canned-title")))
	ann.do("add a canned reply", chromedp.SendKeys(chromedp.CSS("#canned-title"), "Refund policy"),
		chromedp.SendKeys(chromedp.CSS("#canned-text"), "Hi {{visitor.first_name|there}}, refunds take 5 days. {{operator.first_name}}"),
		chromedp.Click(chromedp.CSS("#canned-save")))
	ann.waitJS("listed", `document.querySelector('#canned-list li[data-id] b').textContent === 'Refund policy'`)
	ann.do("and a second", chromedp.SendKeys(chromedp.CSS("#canned-title"), "Opening hours"),
		chromedp.SendKeys(chromedp.CSS("#canned-text"), "We answer 9 to 5."), chromedp.Click(chromedp.CSS("#canned-save")))
	ann.waitJS("two listed", `document.querySelectorAll('#canned-list li[data-id]').length === 2`)
	ann.do("a title taken", chromedp.SendKeys(chromedp.CSS("#canned-title"), "refund POLICY"),
		chromedp.SendKeys(chromedp.CSS("#canned-text"), "x"), chromedp.Click(chromedp.CSS("#canned-save")))
	ann.waitJS("refused with a sentence", `document.querySelector('#canned-msg.error').textContent.includes('already')`)
	ann.do("scroll to them", chromedp.ScrollIntoView(chromedp.CSS("#canned")))
	ann.shot("settings")

	pick := `document.querySelector('#canned-pick')`
	bob := newTab(t, "bob")
	bob.login(e.base, "bob@answers.test", pw)
	bob.openFirstConversation()
	bob.do("reply, /ref", chromedp.WaitVisible(chromedp.CSS("#reply")), chromedp.Click(chromedp.CSS("#reply")), chromedp.KeyEvent("/ref"))
	bob.waitJS("the picker, one match", `!`+pick+`.hidden && `+pick+`.querySelectorAll('li[role=option]').length === 1`)
	bob.shot("picker")
	bob.do("Enter", chromedp.KeyEvent(kb.Enter))
	bob.waitJS("the text, filled in", `document.querySelector('#reply').value === 'Hi there, refunds take 5 days. Bob' && `+pick+`.hidden`)

	// The list follows an edit made elsewhere, while open.
	bob.do("a second reply, /", chromedp.KeyEvent(" /"))
	bob.waitJS("both in the picker", pick+`.querySelectorAll('li[role=option]').length === 2`)
	ann.do("edit the refund reply", chromedp.Click(chromedp.CSS(`#canned-list li[data-id] button.edit`)))
	ann.waitJS("in the form", `document.querySelector('#canned-title').value === 'Opening hours'`) // listed by title: Opening first
	ann.do("new text", chromedp.SetValue(chromedp.CSS("#canned-text"), "We answer 8 to 6 now."), chromedp.Click(chromedp.CSS("#canned-save")))
	bob.waitJS("the new text in Bob's open picker", `Array.from(`+pick+`.querySelectorAll('li[role=option] span')).some(s => s.textContent === 'We answer 8 to 6 now.')`)
	bob.noReload()
	bob.do("arrow down to it, Tab", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowUp), chromedp.KeyEvent(kb.Tab))
	bob.waitJS("inserted where the / was", `document.querySelector('#reply').value === 'Hi there, refunds take 5 days. Bob We answer 8 to 6 now.'`)
	bob.do("/ then Escape", chromedp.KeyEvent(" /"), chromedp.KeyEvent(kb.Escape))
	bob.waitJS("closed, the reply kept", pick+`.hidden && document.activeElement === document.querySelector('#reply')`)

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "bob@answers.test", pw)
	phone.openFirstConversation()
	phone.do("/", chromedp.WaitVisible(chromedp.CSS("#reply")), chromedp.Click(chromedp.CSS("#reply")), chromedp.KeyEvent("/"))
	phone.waitJS("the picker", `!`+pick+`.hidden && `+pick+`.querySelectorAll('li[role=option]').length === 2`)
	if n := eval[float64](phone, pick+`.getBoundingClientRect().right - document.documentElement.clientWidth`); n > 0 {
		t.Fatalf("the picker overflows a 390 px screen by %v px", n)
	}
	if top := eval[float64](phone, pick+`.getBoundingClientRect().top`); top < 0 {
		t.Fatalf("the picker starts %v px above the screen", -top)
	}
	phone.shot("picker")
}
