package browsertest

import (
	"testing"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/plans"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// Issue 38, point 1, as a visitor sees it: the site's plan takes one new conversation a
// month. The first visitor chats; the next one's first message is not sent, and the window
// says why in a sentence, with no Retry (on a phone too; in the window's language); the first
// visitor goes on.
func TestPlanLimitInTheWindow(t *testing.T) {
	cfg, err := plans.Parse([]byte(`{"default":"tiny","plans":{"tiny":{"conversations_per_month":1}}}`))
	testkit.NoErr(t, err)
	cfg.PaddleSecrets = []string{"pdl_ntfset_01mock_secret_key_one_0123456789"}
	e := startEdge(t, server.Config{Plans: cfg})
	site := e.site(&store.Site{Name: "Tiny"})

	first := newTab(t, "first")
	first.openDemo(e.base, site.Key)
	first.openChat()
	first.typeAndSend("I got in first")
	first.waitSent("I got in first")

	late := newTab(t, "late")
	late.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	late.openDemo(e.base, site.Key)
	late.openChat()
	late.typeAndSend("Hello? Anyone?")
	late.waitJS("the sentence under the message", W+`.querySelector('ol li.me') && `+W+`.querySelector('ol li.me').textContent.includes('not taking new conversations')`)
	if eval[bool](late, W+`.querySelector('ol li.me .state button') !== null`) {
		t.Fatal("a Retry under a message the plan refuses for the month")
	}
	late.shot("plan-limit")

	first.typeAndSend("and I can go on")
	first.waitSent("and I can go on")

	// A window in German says it in German.
	de := e.site(&store.Site{Name: "Winzig", Widget: schema.WidgetSettings{Language: "de"}})
	for i, who := range []string{"erster", "später"} {
		v := newTab(t, who)
		v.openDemo(e.base, de.Key)
		v.openChat()
		v.typeAndSend("Hallo")
		if i == 0 {
			v.waitSent("Hallo")
			continue
		}
		v.waitJS("the sentence in German", W+`.querySelector('ol li.me') && `+W+`.querySelector('ol li.me').textContent.includes('nimmt gerade keine neuen Gespr\u00e4che an')`)
	}
}
