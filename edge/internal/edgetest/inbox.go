package edgetest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"
)

// Inbox speaks the operator API (/v1/api/) to an edge as one logged-in session, or as an
// API token: what the web inbox and an operator's script do.
type Inbox struct {
	Addr   string
	Cookie string // the session cookie's value ("" for a token)
	CSRF   string
	Token  string // an API token, sent instead of the cookie when set
}

// Login logs in and fails the test unless it succeeds.
func Login(t testing.TB, addr, email, password string) *Inbox {
	t.Helper()
	in, status := LoginStatus(t, addr, email, password)
	if status != http.StatusOK {
		t.Fatalf("login %s: status %d", email, status)
	}
	return in
}

// LoginStatus tries to log in and returns the session (nil unless 200) and the status.
func LoginStatus(t testing.TB, addr, email, password string) (*Inbox, int) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"email": email, "password": password})
	resp, err := http.Post("http://"+addr+"/v1/api/login", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var out struct {
		CSRF string `json:"csrf_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	in := &Inbox{Addr: addr, CSRF: out.CSRF}
	for _, c := range resp.Cookies() {
		if c.Name == "spookat_session" {
			in.Cookie = c.Value
		}
	}
	if in.Cookie == "" {
		t.Fatal("login answered 200 without a session cookie")
	}
	return in, resp.StatusCode
}

func (in *Inbox) header(h http.Header) {
	if in.Token != "" {
		h.Set("Authorization", "Bearer "+in.Token)
		return
	}
	if in.Cookie != "" {
		h.Set("Cookie", "spookat_session="+in.Cookie)
	}
	if in.CSRF != "" {
		h.Set("X-CSRF-Token", in.CSRF)
	}
}

// Do calls /v1/api/<path> with a JSON body (nil: none) and decodes the answer into out
// (nil: dropped); it returns the status.
func (in *Inbox) Do(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	status, err := in.Call(method, path, body, out)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// Call is Do returning its error, for goroutines that may not fail the test.
func (in *Inbox) Call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, "http://"+in.Addr+"/v1/api"+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	in.header(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode, nil
}

// NewToken makes an API token of this session's operator.
func (in *Inbox) NewToken(t testing.TB) *Inbox {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	if st := in.Do(t, http.MethodPost, "/tokens", map[string]string{"name": "test"}, &out); st != http.StatusCreated || out.Token == "" {
		t.Fatalf("POST /tokens: %d", st)
	}
	return &Inbox{Addr: in.Addr, Token: out.Token}
}

// OpSocket is an operator websocket (/v1/api/ws).
type OpSocket struct {
	WS *fws.Conn
}

// DialInbox opens the operator websocket and reads its ready frame.
func (in *Inbox) DialInbox(t testing.TB) *OpSocket {
	t.Helper()
	return in.dialInbox(t, "")
}

// DialInboxBatched opens the operator websocket with ?batch=1, as the inbox page does.
func (in *Inbox) DialInboxBatched(t testing.TB) *OpSocket {
	t.Helper()
	return in.dialInbox(t, "?batch=1")
}

// NextRaw reads one frame as it came.
func (s *OpSocket) NextRaw(timeout time.Duration) ([]byte, error) {
	_ = s.WS.SetReadDeadline(time.Now().Add(timeout))
	_, b, err := s.WS.ReadMessage()
	return b, err
}

func (in *Inbox) dialInbox(t testing.TB, query string) *OpSocket {
	t.Helper()
	h := http.Header{}
	in.header(h)
	h.Del("X-CSRF-Token")
	d := fws.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial("ws://"+in.Addr+"/v1/api/ws"+query, h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial /v1/api/ws: %v (status %d)", err, status)
	}
	t.Cleanup(func() { ws.Close() })
	s := &OpSocket{WS: ws}
	if f, err := s.Next(10 * time.Second); err != nil || f["type"] != "ready" {
		t.Fatalf("first frame %v, %v; want ready", f, err)
	}
	return s
}

// Next reads one event frame within timeout.
func (s *OpSocket) Next(timeout time.Duration) (map[string]any, error) {
	_ = s.WS.SetReadDeadline(time.Now().Add(timeout))
	_, b, err := s.WS.ReadMessage()
	if err != nil {
		return nil, err
	}
	var f map[string]any
	return f, json.Unmarshal(b, &f)
}

// WaitClosed reads until the server closes the socket and returns its close code and reason,
// failing the test when frames keep coming or nothing happens within timeout.
func (s *OpSocket) WaitClosed(t testing.TB, timeout time.Duration) (int, string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		_, err := s.Next(time.Until(deadline))
		if ce, ok := err.(*fws.CloseError); ok {
			return ce.Code, ce.Text
		}
		if err != nil {
			t.Fatalf("operator socket: %v, want a close frame", err)
		}
	}
	t.Fatalf("operator socket still open after %s", timeout)
	return 0, ""
}
