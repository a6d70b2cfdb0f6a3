package browsertest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// The widget tells the visitor the truth: a page the server refuses says the chat is not
// available (and the console says why), a server that is down says offline and keeps what the
// visitor writes until it is back.

// viewports are the screens each state is looked at on.
var viewports = []struct {
	name string
	w, h int64
}{{"desktop", 1280, 800}, {"phone", 390, 844}}

func (b *Tab) viewport(w, h int64) {
	b.t.Helper()
	if w == 390 {
		b.do("phone viewport", chromedp.EmulateViewport(w, h, chromedp.EmulateScale(2)))
	}
}

// watch records the tab's console warnings and the widget requests it makes to addr.
type watch struct {
	mu       sync.Mutex
	warnings []string
	requests []string
}

func (b *Tab) watch(addr string) *watch {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatal(err)
	}
	w := &watch{}
	if err := chromedp.Listen(b.ctx, func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type != runtime.ConsoleAPICalledTypeWarning {
				return
			}
			var parts []string
			for _, a := range ev.Args {
				var s string
				if json.Unmarshal(a.Value, &s) == nil {
					parts = append(parts, s)
				}
			}
			w.warnings = append(w.warnings, strings.Join(parts, " "))
		case *network.EventRequestWillBeSent:
			if i := strings.Index(ev.Request.URL, addr+"/v1/widget/"); i >= 0 && !strings.Contains(ev.Request.URL, "chat.js") {
				w.requests = append(w.requests, ev.Request.URL[i+len(addr):])
			}
		case *network.EventWebSocketCreated:
			if i := strings.Index(ev.URL, addr+"/v1/widget/"); i >= 0 {
				w.requests = append(w.requests, ev.URL[i+len(addr):])
			}
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	return w
}

func (w *watch) seen() (warnings, requests []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.warnings...), append([]string(nil), w.requests...)
}

// 9. An unknown site key and a page whose origin the site does not allow: the window says
// "Chat is not available on this page.", the console says what the server said, and the
// widget stops asking.
func TestRefusedPageSaysNotAvailable(t *testing.T) {
	e := startEdge(t, server.Config{})
	shop := e.site(&store.Site{Name: "Elsewhere", Origins: []string{"https://shop.example"}})
	for _, tc := range []struct {
		name, key  string
		demoStatus int
		code, says string
	}{
		{"unknown key", "st_no_such_site", http.StatusNotFound, "unknown_site", "check data-site in the embed snippet"},
		{"refused origin", shop.Key, http.StatusOK, "origin_not_allowed", "add it in the site's settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(e.base + "/demo?site=" + tc.key)
			testkit.NoErr(t, err)
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.demoStatus {
				t.Fatalf("/demo: status %d, want %d", resp.StatusCode, tc.demoStatus)
			}
			if unknown := strings.Contains(string(page), "No site has the key"); unknown != (tc.demoStatus == http.StatusNotFound) {
				t.Fatalf("/demo says the key is unknown: %v, want %v", unknown, !unknown)
			}
			for _, vp := range viewports {
				t.Run(vp.name, func(t *testing.T) {
					v := newTab(t, "visitor-"+vp.name)
					v.viewport(vp.w, vp.h)
					w := v.watch(e.edge.Addr)
					v.openDemo(e.base, tc.key)
					v.openChat()
					v.waitJS("the not-available notice", W+`.querySelector('.panel.dead .gone')?.offsetParent != null && `+
						W+`.querySelector('.gone').textContent === 'Chat is not available on this page.'`)
					if eval[bool](v, W+`.querySelector('.panel > form').offsetParent != null`) {
						t.Fatal("the message box is still shown on a refused page")
					}
					testkit.WaitFor(t, "a console warning naming "+tc.code, stepTimeout, func() bool {
						warnings, _ := w.seen()
						for _, s := range warnings {
							if strings.Contains(s, tc.code) && strings.Contains(s, tc.says) {
								return true
							}
						}
						return false
					})
					if tc.demoStatus == http.StatusNotFound && !eval[bool](v, `document.querySelector('.bad')?.textContent.includes('No site has the key')`) {
						t.Fatal("the demo page does not say the key is unknown")
					}
					v.shot("not-available")
					// No retry loop: past the first backoff steps, still one socket and one probe.
					v.quiet(1500 * time.Millisecond)
					if _, after := w.seen(); len(after) != 2 ||
						!strings.HasPrefix(after[0], "/v1/widget/ws?") || !strings.HasPrefix(after[1], "/v1/widget/check?") {
						t.Fatalf("requests after the refusal: %q, want one socket and one check, then nothing", after)
					}
				})
			}
		})
	}
}

// 10. The server stops: the window says offline, a message written meanwhile shows as
// pending (not "Sending…" for ever), and is delivered, once, when the server is back.
func TestServerDownShowsOfflineThenDelivers(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			e := startEdge(t, server.Config{})
			site := e.site(&store.Site{Name: "Down"})
			v := newTab(t, "visitor-"+vp.name)
			v.viewport(vp.w, vp.h)
			v.openDemo(e.base, site.Key)
			v.openChat()
			v.typeAndSend("before the stop")
			v.waitSent("before the stop")

			e.edge.Stop(t)
			v.waitJS("the offline notice", W+`.querySelector('.offline.on')?.textContent === 'Offline \u2014 your message will be sent when we\u2019re back.' && `+
				W+`.querySelector('.conn').textContent === 'offline'`)
			v.typeAndSend("written while offline")
			mine := `Array.from(` + W + `.querySelectorAll('li.me')).find(li => li.querySelector('.bubble').textContent === 'written while offline')`
			v.waitJS("the message pending", mine+`?.querySelector('.state[data-state=pending]')?.textContent === 'Pending'`)
			v.shot("offline")

			e.edge = edgetest.Start(t, e.edge.DataDir, server.Config{Addr: e.edge.Addr})
			v.waitSent("written while offline")
			v.waitJS("the offline notice gone", `!`+W+`.querySelector('.offline.on') && `+W+`.querySelector('.conn').textContent === ''`)
			for _, text := range []string{"before the stop", "written while offline"} {
				if n := eval[int](v, bubbleCount(text)); n != 1 {
					t.Fatalf("%q shows %d times, want once", text, n)
				}
			}
			db := edgetest.OpenDB(t, e.edge.DataDir)
			if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != 2 {
				t.Fatalf("%d messages stored, want 2 (each once)", n)
			}
			v.shot("back")
		})
	}
}

// 11. Too many new sockets from one address: the window waits the Retry-After the preflight
// gives, connects once, and sends what was written meanwhile.
func TestRateLimitedWaitsRetryAfter(t *testing.T) {
	e := startEdge(t, server.Config{Brakes: brakes.Config{IPSocketRate: 0.5, IPSocketBurst: 1}})
	site := e.site(&store.Site{Name: "Busy door"})
	first := newTab(t, "first")
	first.openDemo(e.base, site.Key)
	first.openChat()
	first.waitJS("the first tab connected", first.helloJS())

	// Same address, same (site, IP) budget: the second tab's socket is refused with 429.
	v := newTab(t, "second")
	w := v.watch(e.edge.Addr)
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.typeAndSend("after the wait")
	v.waitSent("after the wait")
	_, reqs := w.seen()
	if len(reqs) != 3 || !strings.HasPrefix(reqs[0], "/v1/widget/ws?") || !strings.HasPrefix(reqs[1], "/v1/widget/check?") ||
		!strings.HasPrefix(reqs[2], "/v1/widget/ws?") {
		t.Fatalf("requests: %q, want a refused socket, one check, and one socket after Retry-After", reqs)
	}
}

// helloJS is true once the chat window's socket is open and greeted.
func (b *Tab) helloJS() string {
	return `window.localStorage.getItem('spookat:' + document.querySelector('script[data-site]').dataset.site) !== null && ` +
		W + `.querySelector('.conn').textContent === ''`
}
