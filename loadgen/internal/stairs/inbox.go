package stairs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Operator is a seeded operator whose inbox watches some sites during a run.
type Operator struct {
	Email, Password string
	Sites           []string // site keys
}

// SeedOperators adds n operators with `edge operator add` (through the running edge):
// operator i is a member of every n-th of the first `sockets` sites, the ones the run's
// sockets write to, so that together their inboxes receive every message.
func SeedOperators(ctx context.Context, edgeBin, dataDir string, keys []string, sockets, n int) ([]Operator, error) {
	used := min(sockets, len(keys))
	if n <= 0 || used == 0 {
		return nil, nil
	}
	n = min(n, used)
	ops := make([]Operator, n)
	for i := range ops {
		ops[i] = Operator{Email: fmt.Sprintf("load-op-%d-%d@loadgen.test", time.Now().UnixNano()%1e6, i), Password: "loadgen-password-" + strconv.Itoa(i)}
	}
	for j := range used {
		ops[j%n].Sites = append(ops[j%n].Sites, keys[j])
	}
	for _, op := range ops {
		args := []string{"operator", "add", "-data", dataDir, "-email", op.Email, "-password-stdin"}
		for _, k := range op.Sites {
			args = append(args, "-site", k)
		}
		cmd := exec.CommandContext(ctx, edgeBin, args...)
		cmd.Stdin = strings.NewReader(op.Password + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s operator add %s: %v: %s", edgeBin, op.Email, err, bytes.TrimSpace(out))
		}
	}
	return ops, nil
}

// openInboxes logs every operator in and opens its inbox websocket, which then counts the
// message frames it receives. The edge allows 10 logins a minute from one address: on
// loopback each group of 8 operators logs in from an address of its own (127.0.0.2, .3, …).
func (r *runner) openInboxes(ctx context.Context) error {
	base, err := url.Parse(r.cfg.EdgeURL)
	if err != nil {
		return err
	}
	loopback := false
	if ip := net.ParseIP(base.Hostname()); ip != nil && ip.IsLoopback() && ip.To4() != nil {
		loopback = true
	}
	wsURL := *base
	wsURL.Scheme = strings.Replace(base.Scheme, "http", "ws", 1)
	wsURL.Path = "/v1/api/ws"
	wsURL.RawQuery = "batch=1" // as the inbox page asks: events a few ms apart share a frame
	var wg sync.WaitGroup
	errs := make([]error, len(r.cfg.Operators))
	for i, op := range r.cfg.Operators {
		wg.Go(func() {
			d := &net.Dialer{Timeout: 10 * time.Second}
			if loopback {
				d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, byte(i/8/250), byte(2+i/8%250))}
			}
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
			body, _ := json.Marshal(map[string]string{"email": op.Email, "password": op.Password})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.cfg.EdgeURL, "/")+"/v1/api/login", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				errs[i] = fmt.Errorf("login %s: %w", op.Email, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("login %s: %s", op.Email, resp.Status)
				return
			}
			hdr := http.Header{}
			for _, c := range resp.Cookies() {
				hdr.Add("Cookie", c.Name+"="+c.Value)
			}
			wd := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: d.DialContext}
			c, resp, err := wd.DialContext(ctx, wsURL.String(), hdr)
			if err != nil {
				status := ""
				if resp != nil {
					status = resp.Status
				}
				errs[i] = fmt.Errorf("inbox websocket of %s: %v %s", op.Email, err, status)
				return
			}
			r.inboxLock.Lock()
			r.inboxes = append(r.inboxes, c)
			r.inboxLock.Unlock()
			go r.inboxReader(c)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) inboxReader(c *websocket.Conn) {
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			if !r.closing.Load() {
				r.inboxClosed.Add(1)
			}
			return
		}
		r.inboxFrames.Add(int64(bytes.Count(data, []byte(`"type":"message"`))))
	}
}
