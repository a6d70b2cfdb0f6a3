package browsertest

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// Issue 34, point 1: "/" goes to the search box; typing finds a visitor's message among
// others, highlighted; Enter opens the conversation at that message, in view. On a phone the
// results take the screen and a tap opens the conversation the same way.
func TestSearchOpensTheMessage(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Parcels"})
	e.operator("sam@parcels.test", "Sam", "correct horse battery", site.Key)

	// One long conversation with the message in its middle, and others beside it.
	long := edgetest.Dial(t, e.edge.Addr, site.Key, "")
	var want int64
	for i := range 40 {
		text := fmt.Sprintf("Still here, message %d of a long wait", i)
		if i == 20 {
			text = "My parcel tracking number is ZX-4471 and it has not moved since Monday"
		}
		ack, err := long.SendAck(fmt.Sprint("l-", i), text)
		testkit.NoErr(t, err)
		if i == 20 {
			want = ack.MessageID
		}
	}
	for i, text := range []string{"Do you ship to Norway?", "Is the parcel insured?", "Hello, a question about pricing"} {
		c := edgetest.Dial(t, e.edge.Addr, site.Key, "")
		_, err := c.SendAck(fmt.Sprint("o-", i), text)
		testkit.NoErr(t, err)
	}
	token := e.apiToken("sam@parcels.test", "correct horse battery")
	testkit.WaitFor(t, "the messages in the search index", 10*time.Second, func() bool {
		var res struct{ Hits []any }
		return e.api("GET", "/sites/"+strconv.FormatInt(site.ID, 10)+"/search?q="+url.QueryEscape("pricing"), token, nil, &res) == 200 && len(res.Hits) == 1
	})

	results := `document.querySelectorAll('#conversations li.hit')`
	found := `(() => { const li = document.querySelector('#messages li.msg.found[data-id="` + strconv.FormatInt(want, 10) + `"]');
		if (!li) return false; const r = li.getBoundingClientRect(), box = document.querySelector('#messages').getBoundingClientRect();
		return r.top >= box.top && r.bottom <= box.bottom; })()`

	op := newTab(t, "operator")
	op.login(e.base, "sam@parcels.test", "correct horse battery")
	op.waitJS("the list", `document.querySelectorAll('#conversations li[data-id]').length === 4`)
	op.do("press /", chromedp.KeyEvent("/"))
	op.waitJS("the search box focused", `document.activeElement === document.querySelector('#search')`)
	op.do("type", chromedp.KeyEvent("parcel track"))
	op.waitJS("one result, the words marked", `document.querySelector('#search').value === 'parcel track' && `+results+`.length === 1 && Array.from(document.querySelectorAll('#conversations li.hit mark')).map(m => m.textContent).join() === 'parcel,tracking'`)
	op.shot("results")
	op.do("open it", chromedp.KeyEvent(kb.Enter))
	op.waitJS("the conversation open at the message, in view", found)
	op.shot("found")
	op.do("back to search, the words selected", chromedp.KeyEvent("/"))
	op.do("a word of two conversations", chromedp.KeyEvent("parcel "))
	op.waitJS("two results, the newest first", results+`.length === 2 && `+results+`[0].textContent.includes('insured')`)
	eval[any](op, `document.querySelector('#search').select()`)
	op.do("nothing", chromedp.KeyEvent("xylophone "))
	op.waitJS("says there is nothing", `document.querySelector('#search-empty')`)
	op.do("Escape", chromedp.KeyEvent(kb.Escape))
	op.waitJS("the conversations again", `document.querySelectorAll('#conversations li[data-id]').length === 4 && document.querySelector('#search').value === ''`)

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "sam@parcels.test", "correct horse battery")
	phone.do("type in the search box", chromedp.Click(chromedp.CSS("#search")), chromedp.KeyEvent("ZX-4471"))
	phone.waitJS("the result", results+`.length === 1`)
	if n := eval[float64](phone, `document.querySelector('#search').getBoundingClientRect().right - document.documentElement.clientWidth`); n > 0 {
		t.Fatalf("the search box overflows a 390 px screen by %v px", n)
	}
	phone.shot("results")
	phone.do("tap it", chromedp.Click(chromedp.CSS("#conversations li.hit a")))
	phone.waitJS("the conversation alone, at the message", found+` && getComputedStyle(document.querySelector('nav.side')).display === 'none'`)
	phone.shot("found")
}
