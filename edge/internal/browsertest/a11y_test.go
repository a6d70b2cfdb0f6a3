package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// axeVersion is the axe-core release the audit runs (from npm, cached under the temp dir).
const axeVersion = "4.10.3"

var (
	axeOnce sync.Once
	axeJS   string
	axeErr  error
)

// axeSource returns axe-core's script, installing it with npm the first time; without npm or
// the registry the audit is skipped, loudly.
func axeSource(t *testing.T) string {
	t.Helper()
	axeOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "spookat-axe-"+axeVersion)
		file := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
		if _, err := os.Stat(file); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, "npm", "install", "--no-save", "--no-audit", "--no-fund", "--prefix", dir,
				"axe-core@"+axeVersion).CombinedOutput()
			if err != nil {
				axeErr = fmt.Errorf("npm install axe-core@%s: %v: %s", axeVersion, err, strings.TrimSpace(string(out)))
				return
			}
		}
		b, err := os.ReadFile(file)
		axeJS, axeErr = string(b), err
	})
	if axeErr != nil {
		msg := "ACCESSIBILITY AUDIT SKIPPED: " + axeErr.Error()
		fmt.Fprintf(os.Stderr, "\n!!! %s !!!\n", msg)
		t.Skip(msg)
	}
	return axeJS
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// audit runs axe-core's WCAG 2 A and AA rules on the page, the widget's shadow root included.
func (b *Tab) audit(src string) []axeViolation {
	b.t.Helper()
	eval[any](b, src+`;0`)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})
		.then(r => JSON.stringify(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' > '))}))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: axe: %v", b.name, err)
	}
	var out []axeViolation
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		b.t.Fatalf("axe's answer %q: %v", raw, err)
	}
	return out
}

// requireAccessible runs the audit and fails the test on a serious or critical violation;
// every violation found is logged.
func (b *Tab) requireAccessible(src, when string) {
	b.t.Helper()
	var serious []string
	for _, x := range b.audit(src) {
		b.t.Logf("axe, %s, %s: %s (%s): %s at %s", b.name, when, x.ID, x.Impact, x.Help, strings.Join(x.Nodes, "; "))
		if x.Impact == "serious" || x.Impact == "critical" {
			serious = append(serious, x.ID)
		}
	}
	if len(serious) > 0 {
		b.t.Errorf("%s, %s: serious accessibility violations: %v", b.name, when, serious)
	}
}

// The chat window on a phone: an automated WCAG 2.1 A/AA audit (axe-core) of the page with
// the launcher, then with the window open holding a greeting, a message and a reply, finds
// nothing serious or critical (what it finds is logged); 16 px inputs (no zoom on iOS),
// 44 px targets, a dialog with a name, focus kept inside it, Escape back to the launcher, and
// a composer that grows with the text.
func TestWidgetAccessibility(t *testing.T) {
	e := startEdge(t, server.Config{})
	src := axeSource(t)
	site := e.site(&store.Site{Name: "A11y", Widget: schema.WidgetSettings{Title: "Help", Greeting: "Hello! How can we help?"}})
	v := newTab(t, "visitor")
	v.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	v.openDemo(e.base, site.Key)

	check := func(when string) { t.Helper(); v.requireAccessible(src, when) }
	check("launcher")

	v.openChat()
	v.typeAndSend("Can I pay by invoice?")
	v.waitSent("Can I pay by invoice?")
	v.waitJS("the greeting", W+`.querySelector('li.greet')`)
	check("window open")

	if fs := eval[string](v, `getComputedStyle(`+W+`.querySelector('.panel > form textarea')).fontSize`); fs != "16px" {
		t.Errorf("the composer's text is %s; under 16px iOS zooms the page", fs)
	}
	for _, sel := range []string{"header button", ".panel > form button.att", ".panel > form button[type=submit]"} {
		wh := eval[[]float64](v, `(() => { const r = `+W+`.querySelector('`+sel+`').getBoundingClientRect(); return [r.width, r.height]; })()`)
		if wh[0] < 44 || wh[1] < 44 {
			t.Errorf("%s is %vx%v px; targets need 44x44", sel, wh[0], wh[1])
		}
	}
	if l := eval[string](v, W+`.querySelector('.panel').getAttribute('aria-labelledby')`); l == "" ||
		eval[string](v, W+`.getElementById('`+l+`').textContent`) != "Help" {
		t.Errorf("the dialog is not named by its title (aria-labelledby %q)", l)
	}

	// Keyboard: Shift+Tab from the first control wraps to the last, Tab from the last to the first.
	eval[any](v, W+`.querySelector('header button').focus()`)
	v.do("shift+tab", chromedp.KeyEvent("\t", chromedp.KeyModifiers(chromedp.ModifierShift)))
	if id := eval[string](v, W+`.activeElement && `+W+`.activeElement.textContent`); id != "Send" {
		t.Errorf("Shift+Tab from the close button went to %q, want the Send button", id)
	}
	v.do("tab", chromedp.KeyEvent("\t"))
	if eval[bool](v, W+`.activeElement !== `+W+`.querySelector('header button')`) {
		t.Error("Tab from the last control left the window")
	}

	// The composer grows with its text, up to a limit.
	h0 := eval[float64](v, W+`.querySelector('.panel > form textarea').getBoundingClientRect().height`)
	eval[any](v, `(() => { const t = `+W+`.querySelector('.panel > form textarea'); t.value = 'one\ntwo\nthree\nfour'; t.dispatchEvent(new Event('input')); })()`)
	h1 := eval[float64](v, W+`.querySelector('.panel > form textarea').getBoundingClientRect().height`)
	if h1 <= h0 || h1 > 121 {
		t.Errorf("the composer is %v px high with four lines (%v with one); it should grow, to 120 at most", h1, h0)
	}
	v.shot("phone-open")

	v.do("escape", chromedp.KeyEvent("\u001b"))
	v.waitJS("closed", W+`.querySelector('.panel.open') === null`)
	if eval[bool](v, W+`.activeElement !== `+W+`.querySelector('#l')`) {
		t.Error("Escape did not give the focus back to the launcher")
	}
	if l := eval[string](v, W+`.querySelector('#l').getAttribute('aria-expanded')`); l != "false" {
		t.Errorf("launcher aria-expanded %q after closing", l)
	}
}
