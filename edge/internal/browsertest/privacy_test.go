package browsertest

import (
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// Issue 36, points 1, 2 and 4: in the site's settings, by the retention, an owner exports a
// person's data and erases them; the erasure asks twice, says what went, and the person's
// conversation leaves the list live while another stays; the site's activity shows it, by
// operator and by date. On a phone the tools fit.
func TestPrivacyInSettings(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Private"})
	const pw = "correct horse battery"
	e.operator("pia@private.test", "Pia", pw, site.Key)
	for _, v := range []struct{ email, text string }{{"zoe@example.com", "Please forget me"}, {"max@example.com", "I stay"}} {
		c := edgetest.Dial(t, e.edge.Addr, site.Key, "")
		_, err := c.SendAck("m-"+v.email, v.text)
		testkit.NoErr(t, err)
		c.Send(t, map[string]any{"type": "email", "email": v.email}) // a message first, then the address
	}
	op := newTab(t, "owner")
	op.login(e.base, "pia@private.test", pw)
	op.waitJS("two conversations", `document.querySelectorAll('#conversations li[data-id]').length === 2`)
	op.do("open the settings", chromedp.Navigate(e.base+"/app/#/sites/"+strconv.FormatInt(site.ID, 10)+"/settings"),
		chromedp.WaitVisible(chromedp.CSS("#person-who")), chromedp.ScrollIntoView(chromedp.CSS("#privacy")))
	if eval[bool](op, `!document.querySelector('#privacy').contains(document.querySelector('#set-retention_days'))`) {
		t.Fatal("retention and a person's data are not in one place")
	}
	op.do("name Zoë", chromedp.SendKeys(chromedp.CSS("#person-who"), "zoe@example.com"))
	href := ""
	eval[any](op, `(() => { window.__dl = ''; const orig = HTMLAnchorElement.prototype.click; HTMLAnchorElement.prototype.click = function () { window.__dl = this.getAttribute('href'); }; })()`)
	op.do("export", chromedp.Click(chromedp.CSS("#person-export")))
	href = eval[string](op, `window.__dl`)
	if href != "/v1/api/sites/"+strconv.FormatInt(site.ID, 10)+"/people/export?email=zoe%40example.com" {
		t.Fatalf("the export downloads %q", href)
	}
	token := e.apiToken("pia@private.test", pw)
	if st := e.api("GET", href[len("/v1/api"):], token, nil, nil); st != 200 {
		t.Fatalf("the export link: %d", st)
	}
	op.do("erase: once", chromedp.Click(chromedp.CSS("#person-erase")))
	op.waitJS("asks again", `document.querySelector('#person-erase').textContent.includes('for good?')`)
	op.shot("privacy")
	op.do("erase: for good", chromedp.Click(chromedp.CSS("#person-erase")))
	op.waitJS("says what went", `document.querySelector('#person-msg').textContent.includes('Erased: 1 visitor record(s), 1 conversation(s), 1 message(s)')`)
	op.waitJS("Zoë's conversation left the list, Max's stays", `document.querySelectorAll('#conversations li[data-id]').length === 1 && document.querySelector('#conversations').textContent.includes('I stay')`)
	op.noReload()
	op.shot("erased")
	// The site's activity says it, and how the person was named, not who.
	op.waitJS("the erasure in the activity", `document.querySelector('#audit-list li[data-action=person_erased]') &&
		document.querySelector('#audit-list li[data-action=person_erased]').textContent.includes('pia@private.test erased a person') &&
		!document.querySelector('#audit-list').textContent.includes('zoe@example.com')`)
	// Its filters: another member's entries show, then Pia's alone, then a day with none.
	e.operator("max@private.test", "Max", pw, site.Key)
	e.apiToken("max@private.test", pw) // Max logs in and makes a token
	op.do("read the settings again", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#audit-operator")))
	op.waitJS("Max's entries", `document.querySelector('#audit-list').textContent.includes('max@private.test logged in')`)
	eval[any](op, `(() => { const s = document.querySelector('#audit-operator');
		s.value = [...s.options].find(o => o.textContent === 'Pia').value; s.dispatchEvent(new Event('change')); })()`)
	op.waitJS("Pia's alone", `(() => { const t = document.querySelector('#audit-list').textContent;
		return t.includes('pia@private.test erased a person') && !t.includes('max@private.test'); })()`)
	op.do("the activity", chromedp.ScrollIntoView(chromedp.CSS("#activity")))
	op.shot("activity")
	eval[any](op, `(() => { const d = document.querySelector('#audit-from'), t = new Date(Date.now() + 2 * 86400e3);
		d.value = t.getFullYear() + '-' + String(t.getMonth() + 1).padStart(2, '0') + '-' + String(t.getDate()).padStart(2, '0');
		d.dispatchEvent(new Event('change')); })()`)
	op.waitJS("nothing from the day after tomorrow", `document.querySelector('#audit-list').textContent === 'Nothing matches.'`)

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "pia@private.test", pw)
	phone.do("open the settings", chromedp.Navigate(e.base+"/app/#/sites/"+strconv.FormatInt(site.ID, 10)+"/settings"),
		chromedp.WaitVisible(chromedp.CSS("#person-who")), chromedp.ScrollIntoView(chromedp.CSS("#person-erase")))
	if n := eval[float64](phone, `Math.max(document.querySelector('#person-erase').getBoundingClientRect().right, document.querySelector('#person-who').getBoundingClientRect().right) - document.documentElement.clientWidth`); n > 0 {
		t.Fatalf("the privacy tools overflow a 390 px screen by %v px", n)
	}
	phone.shot("privacy")
	phone.do("the activity", chromedp.ScrollIntoView(chromedp.CSS("#audit-list")))
	if n := eval[float64](phone, `Math.max(...[...document.querySelectorAll('.audit-filters > *')].map(e => e.getBoundingClientRect().right)) - document.documentElement.clientWidth`); n > 0 {
		t.Fatalf("the activity's filters overflow a 390 px screen by %v px", n)
	}
	phone.shot("activity")
}
