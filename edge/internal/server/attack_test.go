package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// dialFrom opens a TCP connection to addr from a given loopback address (127.0.0.2: another
// client than the test's own 127.0.0.1).
func dialFrom(local, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 2 * time.Second}
	return d.Dial("tcp", addr)
}

// Issue 29, point 1: connections that never send a byte are closed within the request
// timeout, one address holds at most a few connections still opening, and a socket that
// says nothing after its hello is closed. A silent flood four times the socket budget, from
// one address, never keeps another client out for longer than the timeout.
func TestSilentConnectionsDoNotHoldTheBudget(t *testing.T) {
	const timeout = 2 * time.Second
	e := edgetest.Start(t, "", server.Config{MaxSockets: 40, RequestTimeout: timeout, OpeningPerAddr: 16, FirstFrame: timeout})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "flooded", Origins: []string{"*"}})

	var silent []net.Conn
	for range 160 {
		c, err := dialFrom("127.0.0.2", e.Addr)
		if err != nil {
			continue // refused outright: fine
		}
		silent = append(silent, c)
	}
	t.Cleanup(func() {
		for _, c := range silent {
			c.Close()
		}
	})
	// Another client keeps connecting and chatting while the flood stands: a 503 now and then
	// is allowed, never for longer than the timeout.
	start := time.Now()
	var refusedSince time.Time
	for sent := 0; time.Since(start) < 3*timeout; sent++ {
		c, resp, err := edgetest.DialRaw(e.Addr, site.Key, "", "http://site.test")
		switch {
		case err == nil:
			refusedSince = time.Time{}
			v := &edgetest.Client{WS: c}
			if f := v.Read(t); f.Type != "hello" {
				t.Fatalf("first frame %+v", f)
			}
			if _, err := v.SendAck(fmt.Sprint("c", sent), "still here?"); err != nil {
				t.Fatal(err)
			}
			c.Close()
		case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
			if d := time.Since(refusedSince); d > timeout+time.Second {
				t.Fatalf("503 busy for %s while silent connections hold the budget", d)
			}
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("dial: %v (%v)", err, resp)
		}
	}
	// Every silent connection was closed by the edge (or turned away with an answer).
	for i, c := range silent {
		c.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err == nil && n > 0 && !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 429") && !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 503") {
			t.Fatalf("silent connection %d got %q", i, buf[:n])
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("silent connection %d still open after %s", i, 4*timeout)
		}
	}

	// A websocket that says nothing after its hello is closed with 1008.
	ws := edgetest.Dial(t, e.Addr, site.Key, "")
	_, err := ws.ReadErr(3 * timeout)
	var ce *fws.CloseError
	if !errors.As(err, &ce) || ce.Code != fws.ClosePolicyViolation {
		t.Fatalf("a silent socket after its hello: %v, want close 1008", err)
	}
}

// Issue 29, point 2: a visitor socket that stops reading is closed for real once its queue
// is full (1013, then the TCP connection), not left open with its reader still storing.
func TestSlowReaderIsDisconnected(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "slow", Origins: []string{"*"}})
	d := fws.Dialer{HandshakeTimeout: 5 * time.Second, NetDial: func(network, addr string) (net.Conn, error) {
		nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		}}
		return nd.Dial(network, addr)
	}}
	ws, _, err := d.Dial("ws://"+e.Addr+"/v1/widget/ws?site="+site.Key, http.Header{"Origin": {"http://site.test"}})
	testkit.NoErr(t, err)
	defer ws.Close()
	// Many messages, no reading: the acks pile up until the edge gives up on the socket.
	for i := range 3000 {
		ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := ws.WriteJSON(map[string]string{"type": "message", "client_id": fmt.Sprint("s", i), "text": "are you reading?"}); err != nil {
			break // closed under us: what we wait for
		}
	}
	// Without reading a byte, the client sees the edge let go of its socket: the edge's open
	// connections fall back to none (before, the socket stayed, its reader storing on).
	testkit.WaitFor(t, "the edge to close the slow reader's connection", 10*time.Second, func() bool {
		n, ok := edgetest.Metric(e.MetricsAddr, "spookat_connections_open")
		return ok && n == 0
	})
	// Then what came: the frames that got through and a close frame saying 1013.
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		// 1013 when the close frame found room; 1006 (no close frame) when the buffers the
		// client never read left none: either way the widget reconnects and resumes.
		var ce *fws.CloseError
		if errors.As(err, &ce) && ce.Code != fws.CloseTryAgainLater && ce.Code != fws.CloseAbnormalClosure {
			t.Fatalf("closed with %d, want 1013 (try again later: the widget reconnects and resumes)", ce.Code)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("no end of the socket after the edge closed it")
		}
		return
	}
}

// Issue 29, point 8: a client that stops reading in the middle of a resume holds no one
// else's hello: the hello and resume gate covers reading the history, never sending it.
func TestStuckResumeHoldsNoHello(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "long", Origins: []string{"*"}})
	v := edgetest.Dial(t, e.Addr, site.Key, "")
	long := strings.Repeat("a long message, read slowly. ", 130) // ~3.8 kB
	for i := range 1500 {                                        // more than the kernel's socket buffers hold (tcp_wmem's 4 MB)
		if _, err := v.SendAck(fmt.Sprint("h", i), long); err != nil {
			t.Fatal(err)
		}
	}
	// The same visitor again, on a connection with a tiny receive buffer that never reads.
	d := fws.Dialer{HandshakeTimeout: 5 * time.Second, NetDial: func(network, addr string) (net.Conn, error) {
		nd := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		}}
		return nd.Dial(network, addr)
	}}
	stuck, _, err := d.Dial("ws://"+e.Addr+"/v1/widget/ws?site="+site.Key+"&visitor="+v.Hello.Visitor, http.Header{"Origin": {"http://site.test"}})
	testkit.NoErr(t, err)
	defer stuck.Close()
	testkit.NoErr(t, stuck.WriteJSON(map[string]any{"type": "resume", "after_message_id": 0}))
	// The resume has begun once history waits in the stuck client's receive queue.
	testkit.WaitFor(t, "the resume under way", 10*time.Second, func() bool { return rxQueue(t, stuck.UnderlyingConn()) > 0 })
	// Each hello reads its visitor under the gate: held by the stuck resume, none would
	// finish, and the dial fails at its handshake timeout.
	for range 3 {
		edgetest.Dial(t, e.Addr, site.Key, "")
	}
}

// Issue 29, points 3 and 4: an upload needs a visitor whose window is connected (a made-up
// token, or the token of one who left, fills nobody's quota), each visitor has a brake of
// its own, the disk is a budget, and a file is stored under a name that says what it holds.
func TestAnonymousUploadsRefused(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "quota", Origins: []string{"http://site.test"}})
	const origin = "http://site.test"

	made := strings.Repeat("a", schema.VisitorTokenLen) // well formed, no one's
	if r := upload(t, e.Addr, site.Key, origin, made, "a.png", "image/png", onePixelPNG); r.status != http.StatusForbidden || r.err.Code != schema.CodeNotConnected {
		t.Fatalf("a made-up token: %d %+v, want 403 not_connected", r.status, r.err)
	}
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	token := c.Hello.Visitor
	r := upload(t, e.Addr, site.Key, origin, token, "x.html", "text/html", onePixelPNG)
	if r.status != http.StatusCreated || r.file.Name != "x.png" || r.file.Type != "image/png" {
		t.Fatalf("a PNG named x.html: %d %+v %+v, want it stored as x.png", r.status, r.file, r.err)
	}
	if r := upload(t, e.Addr, site.Key, origin, token, `say %22hi%22.txt`, "text/plain", []byte("hello there")); r.status != http.StatusCreated || r.file.Name != "say hi.txt" {
		t.Fatalf("a browser-escaped name: %d %+v", r.status, r.file)
	}
	for i := range 10 {
		r := upload(t, e.Addr, site.Key, origin, token, "a.png", "image/png", onePixelPNG)
		if r.status == http.StatusTooManyRequests && r.err.Code == schema.CodeRateLimited && r.header.Get("Retry-After") != "" {
			break
		}
		if i == 9 {
			t.Fatalf("12 uploads from one visitor at once: never braked (%d %+v)", r.status, r.err)
		}
	}
	c.WS.Close()
	testkit.WaitFor(t, "the visitor gone", 5*time.Second, func() bool {
		r := upload(t, e.Addr, site.Key, origin, token, "a.png", "image/png", onePixelPNG)
		return r.status == http.StatusForbidden && r.err.Code == schema.CodeNotConnected
	})

	// The disk: an edge whose reserve is more than the disk has takes no file.
	full := edgetest.Start(t, "", server.Config{DiskReserve: 1 << 62})
	s2 := edgetest.AddSite(t, full.DataDir, &store.Site{Name: "disk", Origins: []string{origin}})
	c2 := edgetest.Dial(t, full.Addr, s2.Key, "")
	if r := upload(t, full.Addr, s2.Key, origin, c2.Hello.Visitor, "a.png", "image/png", onePixelPNG); r.status != http.StatusInsufficientStorage || r.err.Code != schema.CodeDiskFull {
		t.Fatalf("at the disk's reserve: %d %+v, want 507 disk_full", r.status, r.err)
	}
}

// Issue 29, point 5: six wrong passwords from one address close that address's door to the
// account, not the account: the operator, from another address, logs in with the right
// password (slowed a moment), and the failures are counted for the account.
func TestWrongPasswordsLockNobodyOut(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "guarded", Origins: []string{"*"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@guarded.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	attacker := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	login := func(c *http.Client, password string) int {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"email": "ann@guarded.test", "password": password})
		resp, err := c.Post("http://"+e.Addr+"/v1/api/login", "application/json", strings.NewReader(string(b)))
		testkit.NoErr(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	var codes []int
	for range 6 {
		codes = append(codes, login(attacker, "wrong guess"))
	}
	if fmt.Sprint(codes) != "[401 401 401 401 401 429]" {
		t.Fatalf("six wrong passwords from one address: %v", codes)
	}
	if code := login(attacker, "correct horse battery"); code != http.StatusTooManyRequests {
		t.Fatalf("the guessing address with the right password: %d, want 429 (its door is closed for a minute)", code)
	}
	start := time.Now()
	if code := login(http.DefaultClient, "correct horse battery"); code != http.StatusOK {
		t.Fatalf("the operator from their own address: %d, want 200", code)
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Fatalf("the operator waited %s", took)
	}
	testkit.WaitFor(t, "the failures counted", 5*time.Second, func() bool {
		n, _ := edgetest.Metric(e.MetricsAddr, `spookat_login_failures_total{operator_id="1"}`)
		return n == 5
	})
}

// Issue 29, point 7: a worker's credentials may create the ephemeral consumers of its bucket
// watches, and permissions cannot see a consumer's body; the edge removes at once any other
// consumer (a durable, a push consumer delivering outside the creator's inbox), while the
// workers' own watches and job consumers stay.
func TestForeignConsumersAreRemoved(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	js, auth := connectWorker(t, e, "evil")
	nc := js.Conn()
	ctx := t.Context()
	// First a watch of the worker's own, delivering to its inbox: the edge hears of consumers
	// in order, so once the foreign ones below are gone, this one was judged too.
	kv, err := js.KeyValue(ctx, "THREADS")
	testkit.NoErr(t, err)
	w, err := kv.WatchAll(ctx)
	testkit.NoErr(t, err)
	defer w.Stop()
	select {
	case <-w.Updates():
	case <-time.After(5 * time.Second):
		t.Fatal("the worker's own watch got nothing")
	}
	for _, c := range []struct{ stream, name, body string }{
		{"KV_THREADS", "keep", `{"stream_name":"KV_THREADS","config":{"durable_name":"keep","ack_policy":"explicit"}}`},
		{"KV_SITES", "push", `{"stream_name":"KV_SITES","config":{"name":"push","deliver_subject":"results.y","ack_policy":"none"}}`},
	} {
		m, err := nc.Request("$JS.API.CONSUMER.CREATE."+c.stream+"."+c.name, []byte(c.body), 2*time.Second)
		if err != nil || strings.Contains(string(m.Data), `"error"`) {
			t.Fatalf("%s: %v %s", c.name, err, m.Data)
		}
	}
	// Looked at as the edge does (a worker may not read a bucket's consumers).
	ident, err := auth.Issue(schema.RoleEdge, "")
	testkit.NoErr(t, err)
	enc, err := nats.Connect(e.NATSURL, ident.Options()...)
	testkit.NoErr(t, err)
	defer enc.Close()
	ejs, _ := jetstream.New(enc)
	exists := func(stream, name string) bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := ejs.Consumer(cctx, stream, name)
		if errors.Is(err, jetstream.ErrNotPullConsumer) {
			return true // a push consumer: there
		}
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("consumer %s on %s: %v", name, stream, err)
		}
		return err == nil
	}
	testkit.WaitFor(t, "the edge to remove both", 10*time.Second, func() bool {
		return !exists("KV_THREADS", "keep") && !exists("KV_SITES", "push")
	})
	if _, err := kv.Put(ctx, "slack.1.1", []byte(`1700000000.000100`)); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-w.Updates():
		if u == nil || u.Key() != "slack.1.1" {
			t.Fatalf("watch update %v", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the worker's own watch was removed")
	}
}

// rxQueue is how many bytes wait unread in a loopback TCP connection's receive queue
// (/proc/net/tcp, IPv4). The line is the one with both of the connection's addresses: a local
// port alone also names the TIME_WAIT leftovers of earlier connections that had it (many,
// when other tests' packages run beside this one), whose queue is always empty.
func rxQueue(t *testing.T, c net.Conn) int64 {
	t.Helper()
	hex := func(a net.Addr) string {
		ta := a.(*net.TCPAddr)
		ip := ta.IP.To4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ta.Port)
	}
	local, remote := hex(c.LocalAddr()), hex(c.RemoteAddr())
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("SKIPPED: no /proc/net/tcp: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[1] == local && f[2] == remote {
			_, rx, _ := strings.Cut(f[4], ":")
			n, _ := strconv.ParseInt(rx, 16, 64)
			return n
		}
	}
	return 0
}
