package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
	"spookat/schema/testkit"
)

// The browser is Debian's chromium (`make chromium` installs it), headless, with a fresh
// profile, started once for the package; each test opens its own browser contexts (separate
// cookies and storage, like separate people).

var (
	browserOnce sync.Once
	browserCtx  context.Context
	browserErr  error
	browserStop func()
)

func findChromium() string {
	for _, env := range []string{"SPOOKAT_CHROMIUM", "CHROME_PATH"} {
		if p := os.Getenv(env); p != "" {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browserStop != nil {
		browserStop()
	}
	os.Exit(code)
}

// browser returns the shared browser, starting it on first use. Without chromium the test is
// skipped with a loud message, except in CI (CI=true), where it fails: there it must run.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := findChromium()
	if path == "" {
		msg := "BROWSER TESTS SKIPPED: no chromium found (install it with `make chromium`, or set SPOOKAT_CHROMIUM)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI must run them")
		}
		fmt.Fprintln(os.Stderr, "\n!!! "+msg+" !!!")
		t.Skip(msg)
	}
	browserOnce.Do(func() {
		dir, err := os.MkdirTemp("", "spookat-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 800),
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil { // starts the browser, no timeout
			browserErr = fmt.Errorf("start %s: %w", path, err)
		}
		browserCtx = bctx
		browserStop = func() { bcancel(); acancel(); os.RemoveAll(dir) }
	})
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	return browserCtx
}

// Tab is a tab in a browser context of its own.
type Tab struct {
	t    *testing.T
	name string
	ctx  context.Context
}

func newTab(t *testing.T, name string) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab %s: %v", name, err)
	}
	tab := &Tab{t: t, name: name, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			tab.shot("failed")
		}
	})
	return tab
}

const stepTimeout = 20 * time.Second

// do runs actions, failing the test (with a screenshot) on error.
func (b *Tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("error")
		b.t.Fatalf("%s: %s: %v", b.name, what, err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *Tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: eval %s: %v", b.name, expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is truthy (polled every 50 ms, 20 s at most).
// An expression that throws (an element not there yet) is not true yet; on a timeout the
// last exception is reported with it.
func (b *Tab) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout+time.Second)
	defer cancel()
	guarded := "(() => { try { return !!(" + expr + "\n); } catch (e) { window.__pollError = String(e); return false; } })()"
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](guarded,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout))); err != nil {
		b.shot("timeout")
		last, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`window.__pollError || ''`))
		b.t.Fatalf("%s: waiting for %s (%s): %v (last exception: %q)", b.name, what, expr, err, last)
	}
}

// quiet waits until a page timer of d, set now, has fired. A timer the page set before it (a
// retry, a preload) with a delay no longer fires first, however slow the machine: a negative
// checked after this proves what it says, where a sleep of the test's own may end before
// the page has even run.
func (b *Tab) quiet(d time.Duration) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => { window.__quiet = false; setTimeout(() => { window.__quiet = true }, %d); return true })()`, d.Milliseconds()))
	b.waitJS(fmt.Sprintf("a page timer of %s", d), `window.__quiet === true`)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// shot saves a screenshot under artifacts/browser/ at the repository root (gitignored), or
// $SPOOKAT_ARTIFACTS.
func (b *Tab) shot(label string) {
	dir := os.Getenv("SPOOKAT_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "artifacts")
	}
	dir = filepath.Join(dir, "browser")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return
	}
	name := unsafeName.ReplaceAllString(b.t.Name()+"-"+b.name+"-"+label, "_") + ".png"
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err == nil {
		b.t.Logf("screenshot: %s", filepath.Join(dir, name))
	}
}

// ---- the edge

type env struct {
	t    *testing.T
	edge *edgetest.Edge
	base string // http://127.0.0.1:port
}

func startEdge(t *testing.T, cfg server.Config) *env {
	t.Helper()
	e := edgetest.Start(t, "", cfg)
	return &env{t: t, edge: e, base: "http://" + e.Addr}
}

// metrics returns the edge's /metrics page.
func (e *env) metrics() string {
	e.t.Helper()
	resp, err := http.Get("http://" + e.edge.MetricsAddr + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func (e *env) site(s *store.Site) *store.Site {
	e.t.Helper()
	if len(s.Origins) == 0 {
		s.Origins = []string{"*"}
	}
	return edgetest.AddSite(e.t, e.edge.DataDir, s)
}

func (e *env) operator(email, name, password string, siteKeys ...string) {
	e.t.Helper()
	edgetest.AddOperator(e.t, e.edge.DataDir, admin.OperatorRequest{Email: email, Name: name, Password: password, SiteKeys: siteKeys})
}

// api calls /v1/api/ with an API token (or none) and decodes the JSON answer into out.
func (e *env) api(method, path, token string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, e.base+"/v1/api"+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// apiToken logs in over HTTP and creates an API token for the operator.
func (e *env) apiToken(email, password string) string {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	post := func(path, csrf string, body any) *http.Response {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", e.base+"/v1/api"+path, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := client.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		return resp
	}
	resp := post("/login", "", map[string]string{"email": email, "password": password})
	var login struct {
		CSRF string `json:"csrf_token"`
	}
	json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		e.t.Fatalf("login %s: %d", email, resp.StatusCode)
	}
	resp = post("/tokens", login.CSRF, map[string]string{"name": "test"})
	var tok struct {
		Token string `json:"token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 201 || tok.Token == "" {
		e.t.Fatalf("new token: %d", resp.StatusCode)
	}
	return tok.Token
}

// result publishes r on RESULTS as a worker would (a worker identity of the edge's own
// authority), with its job id, conversation and time filled in from its message.
func (e *env) result(r schema.Result) {
	e.t.Helper()
	auth, err := natsauth.Open(e.edge.DataDir)
	if err != nil {
		e.t.Fatal(err)
	}
	ident, err := auth.Issue(schema.RoleWorker, "browsertest")
	if err != nil {
		e.t.Fatal(err)
	}
	nc, err := nats.Connect(e.edge.NATSURL, ident.Options()...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	r.JobID = schema.JobID(r.MessageID, r.Target)
	r.ConversationID = edgetest.QueryInt(e.t, edgetest.OpenDB(e.t, e.edge.DataDir), `SELECT conversation_id FROM messages WHERE id = ?`, r.MessageID)
	r.At = time.Now()
	b, _ := json.Marshal(r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, schema.ResultSubject("browsertest"), append(b, '\n')); err != nil {
		e.t.Fatal(err)
	}
}

// ---- a TCP proxy that can cut the visitor's connections

type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	down   bool
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.NoErr(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut(false) })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close() // refused while cut
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close(); c.Close() }()
		go func() { io.Copy(c, up); up.Close(); c.Close() }()
	}
}

// cut closes every proxied connection; while down, new ones are closed at once.
func (p *proxy) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// greenPNG is a 40×30 picture, a file an operator posts from Slack or Discord.
func greenPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		for y := range 30 {
			img.Set(x, y, color.RGBA{10, 124, 62, 255})
		}
	}
	var b bytes.Buffer
	testkit.NoErr(t, png.Encode(&b, img))
	return b.Bytes()
}
