package browsertest

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
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
