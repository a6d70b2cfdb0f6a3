package browsertest

import (
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
)

// Issue 33, point 3: a site's owner sets its retention in the inbox's settings; the number is
// kept, shown again, and what it does is said beside it.
func TestRetentionInSettings(t *testing.T) {
	e := startEdge(t, server.Config{})
	site := e.site(&store.Site{Name: "Kept a while"})
	e.operator("rita@kept.test", "Rita", "correct horse battery", site.Key)

	op := newTab(t, "operator")
	op.login(e.base, "rita@kept.test", "correct horse battery")
	settings := e.base + "/app/#/sites/" + strconv.FormatInt(site.ID, 10) + "/settings"
	op.do("open the settings", chromedp.Navigate(settings), chromedp.WaitVisible(chromedp.CSS("#set-retention_days")))
	if hint := eval[string](op, `document.querySelector('#set-retention_days').nextElementSibling.textContent`); hint == "" {
		t.Fatal("the retention field says nothing of what it does")
	}
	op.do("keep conversations 30 days", chromedp.SetValue(chromedp.CSS("#set-retention_days"), "30"),
		chromedp.Click(chromedp.CSS(`#settings button[type=submit]`)))
	op.waitJS("saved", `document.querySelector('#settings-msg').textContent === 'Saved.'`)
	token := e.apiToken("rita@kept.test", "correct horse battery")
	var got struct {
		RetentionDays int `json:"retention_days"`
	}
	if st := e.api("GET", "/sites/"+strconv.FormatInt(site.ID, 10)+"/settings", token, nil, &got); st != 200 || got.RetentionDays != 30 {
		t.Fatalf("settings after saving: %d %+v", st, got)
	}
	op.do("open the settings again", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#set-retention_days")))
	op.waitJS("30 shown", `document.querySelector('#set-retention_days').value === '30'`)
	op.do("scroll to it", chromedp.ScrollIntoView(chromedp.CSS("#set-retention_days")))
	op.shot("retention")

	// On a phone the field fits the screen.
	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "rita@kept.test", "correct horse battery")
	phone.do("open the settings from the top bar", chromedp.Click(chromedp.CSS(`a[href$="/settings"]`)), chromedp.WaitVisible(chromedp.CSS("#set-retention_days")))
	phone.waitJS("30 shown", `document.querySelector('#set-retention_days').value === '30'`)
	if n := eval[float64](phone, `document.querySelector('#set-retention_days').getBoundingClientRect().right - document.documentElement.clientWidth`); n > 0 {
		t.Fatalf("the retention field overflows a 390 px screen by %v px", n)
	}
	phone.do("scroll to it", chromedp.ScrollIntoView(chromedp.CSS("#set-retention_days")))
	phone.shot("retention")
	phone.do("back to the list", chromedp.ScrollIntoView(chromedp.CSS(".settings a.back")), chromedp.Click(chromedp.CSS(".settings a.back")))
	phone.waitJS("the list, alone", `getComputedStyle(document.querySelector('#main')).display === 'none' && getComputedStyle(document.querySelector('#conversations')).display !== 'none'`)
}
