// Package edgetest starts real edges (in-process or as the bin/edge subprocess) and speaks
// the widget protocol to them with real websocket clients, for the edge's tests.
package edgetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"
	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Edge is a running in-process edge.
type Edge struct {
	Addr        string // host:port of HTTP/websocket
	MetricsAddr string // host:port of /metrics
	NATSURL     string // its embedded NATS (credentials: natsauth.Open(DataDir))
	DataDir     string
	stop        context.CancelFunc
	done        chan error
}

// Start runs an edge in this process on free ports, without a worker, and stops it at the
// end of the test.
func Start(t testing.TB, dataDir string, cfg server.Config) *Edge {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	cfg.DataDir = dataDir
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.NATSListen == "" {
		cfg.NATSListen = FreePort(t)
	}
	if cfg.MetricsAddr == "" {
		cfg.MetricsAddr = "127.0.0.1:0"
	}
	ready := make(chan server.Addrs, 1)
	cfg.Ready = func(a server.Addrs) { ready <- a }
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://edge.test"
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Edge{DataDir: dataDir, NATSURL: "nats://" + cfg.NATSListen, stop: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	go func() { e.done <- server.Run(ctx, cfg, log) }()
	select {
	case a := <-ready:
		e.Addr, e.MetricsAddr = a.HTTP, a.Metrics
	case err := <-e.done:
		t.Fatalf("edge did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("edge did not start within 20s")
	}
	t.Cleanup(func() { e.Stop(t) })
	return e
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Stop stops the edge gracefully (idempotent) and fails the test if that fails.
func (e *Edge) Stop(t testing.TB) {
	if e.stop == nil {
		return
	}
	e.stop()
	e.stop = nil
	select {
	case err := <-e.done:
		if err != nil {
			t.Errorf("edge stopped with: %v", err)
		}
	case <-time.After(server.DefaultStopTimeout + 5*time.Second):
		t.Error("edge did not stop in time")
	}
}

// AddSite adds a site through the running edge's admin socket.
func AddSite(t testing.TB, dataDir string, s *store.Site) *store.Site {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	site, err := admin.NewClient(dataDir).AddSite(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return site
}

// AddOperator adds an operator through the running edge's admin socket.
func AddOperator(t testing.TB, dataDir string, op admin.OperatorRequest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.NewClient(dataDir).AddOperator(ctx, op); err != nil {
		t.Fatal(err)
	}
}

// Frame is any server frame, decoded loosely.
type Frame struct {
	Type           string        `json:"type"`
	Visitor        string        `json:"visitor"`
	ConversationID *int64        `json:"conversation_id"`
	LastMessageID  int64         `json:"last_message_id"`
	ReadMessageID  int64         `json:"read_message_id"`
	SeenMessageID  int64         `json:"seen_message_id"`
	Verified       bool          `json:"verified"`
	ClientID       string        `json:"client_id"`
	MessageID      int64         `json:"message_id"`
	CreatedAt      string        `json:"created_at"`
	Author         schema.Author `json:"author"`
	Name           string        `json:"name"`
	Text           string        `json:"text"`
	Code           string        `json:"code"`
	Message        string        `json:"message"`
	RetryAfterMS   int64         `json:"retry_after_ms"`
	File           *schema.File  `json:"file"`
	Status         string        `json:"status"`   // hello, presence
	OpensAt        string        `json:"opens_at"` // hello, presence
}

// Client is a widget websocket client.
type Client struct {
	WS    *fws.Conn
	Hello Frame
	// Presence keeps presence frames (the site's operators came or went) in what Read
	// returns; without it they are skipped, as most tests open an inbox beside a visitor.
	Presence bool
}

// Dial opens a widget socket and reads the hello.
func Dial(t testing.TB, addr, siteKey, token string) *Client {
	t.Helper()
	c, resp, err := DialRaw(addr, siteKey, token, "http://site.test")
	if err != nil {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = fmt.Sprintf(" (%d %s)", resp.StatusCode, b)
		}
		t.Fatalf("dial: %v%s", err, body)
	}
	cl := &Client{WS: c}
	cl.Hello = cl.Read(t)
	if cl.Hello.Type != "hello" {
		t.Fatalf("first frame = %+v, want hello", cl.Hello)
	}
	t.Cleanup(func() { c.Close() })
	return cl
}

// DialRaw opens a widget socket with a given Origin, without reading anything.
func DialRaw(addr, siteKey, token, origin string) (*fws.Conn, *http.Response, error) {
	u := "ws://" + addr + "/v1/widget/ws?site=" + siteKey
	if token != "" {
		u += "&visitor=" + token
	}
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	d := fws.Dialer{HandshakeTimeout: 10 * time.Second}
	return d.Dial(u, h)
}

// DialVisitor opens a widget socket with an Origin and reads the hello, returning errors
// instead of failing the test (for visitors running in goroutines).
func DialVisitor(addr, siteKey, origin string) (*Client, error) {
	ws, _, err := DialRaw(addr, siteKey, "", origin)
	if err != nil {
		return nil, err
	}
	c := &Client{WS: ws}
	if c.Hello, err = c.ReadErr(10 * time.Second); err != nil || c.Hello.Type != "hello" {
		ws.Close()
		return nil, fmt.Errorf("hello: %+v %v", c.Hello, err)
	}
	return c, nil
}

// SendAck sends a message and waits for its ack; any other frame is an error naming it.
func (c *Client) SendAck(clientID, text string) (Frame, error) {
	if err := c.WS.WriteJSON(map[string]string{"type": "message", "client_id": clientID, "text": text}); err != nil {
		return Frame{}, err
	}
	f, err := c.ReadErr(10 * time.Second)
	if err != nil {
		return f, fmt.Errorf("waiting for the ack of %s: %w", clientID, err)
	}
	if f.Type != "ack" || f.ClientID != clientID {
		return f, fmt.Errorf("got %+v while waiting for the ack of %s", f, clientID)
	}
	return f, nil
}

// Send writes a frame (any JSON-encodable value).
func (c *Client) Send(t testing.TB, v any) {
	t.Helper()
	if err := c.WS.WriteJSON(v); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// Read reads one frame, failing the test after 10 s.
func (c *Client) Read(t testing.TB) Frame {
	t.Helper()
	f, err := c.ReadErr(10 * time.Second)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return f
}

// ReadErr reads one frame within timeout.
func (c *Client) ReadErr(timeout time.Duration) (Frame, error) {
	_ = c.WS.SetReadDeadline(time.Now().Add(timeout))
	for {
		_, data, err := c.WS.ReadMessage()
		if err != nil {
			return Frame{}, err
		}
		var f Frame
		if err := json.Unmarshal(data, &f); err != nil {
			return Frame{}, fmt.Errorf("frame %q: %w", data, err)
		}
		if f.Type != "presence" || c.Presence {
			return f, nil
		}
	}
}

// Message sends a message frame.
func (c *Client) Message(t testing.TB, clientID, text string) {
	t.Helper()
	c.Send(t, map[string]string{"type": "message", "client_id": clientID, "text": text})
}

// OpenDB opens the edge's SQLite file read-only, as a second connection would.
func OpenDB(t testing.TB, dataDir string) *sqlite3.Conn {
	t.Helper()
	db, err := store.OpenConn(dataDir+"/"+store.FileName, sqlite3.OPEN_READONLY)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// QueryInt runs a one-integer query.
func QueryInt(t testing.TB, db *sqlite3.Conn, sql string, args ...any) int64 {
	t.Helper()
	st, _, err := db.Prepare(sql)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			st.BindInt64(i+1, v)
		case int:
			st.BindInt64(i+1, int64(v))
		case string:
			st.BindText(i+1, v)
		default:
			t.Fatalf("QueryInt: an argument of type %T", a)
		}
	}
	if !st.Step() {
		t.Fatalf("%s: no row (%v)", sql, st.Err())
	}
	return st.ColumnInt64(0)
}

// QueryText runs a one-text query (PRAGMA integrity_check, say).
func QueryText(t testing.TB, db *sqlite3.Conn, sql string) string {
	t.Helper()
	st, _, err := db.Prepare(sql)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Step() {
		t.Fatalf("%s: no row (%v)", sql, st.Err())
	}
	return st.ColumnText(0)
}

// Metric reads one series from an edge's /metrics (addr: its metrics address), e.g. `spookat_publish_backlog` or
// `spookat_results_rejected_total{reason="site_mismatch"}`.
func Metric(addr, series string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err == nil
		}
	}
	return 0, false
}
