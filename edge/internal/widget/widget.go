// Package widget serves the visitor's websocket: GET /v1/widget/ws?site=<key>[&visitor=<token>].
// The protocol is documented in schema/PROTOCOL.md.
package widget

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	fws "github.com/fasthttp/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/clientip"
	"spookat/edge/internal/files"
	"spookat/edge/internal/frames"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/sockets"
	"spookat/edge/internal/store"
	"spookat/edge/internal/visitorhub"
	"spookat/schema"
)

// resumePage is how many messages one resume query reads at a time.
const resumePage = 200

// FirstFrameTimeout is how long a widget socket may stay silent after its hello (the window
// sends its page at once).
const FirstFrameTimeout = 30 * time.Second

// UploadPath takes a visitor's attachments (upload.go).
const UploadPath = "/v1/widget/files"

// Handler serves widget websockets.
type Handler struct {
	// Plans, if set (an edge with -plans), may refuse a visitor's new conversation past the
	// site's plan; a conversation under way is never refused. Admitted, the conversation
	// holds its place until release is called (release nil: refused, with the sentence).
	Plans interface {
		AdmitConversation(siteID int64) (release func(), sentence string)
	}
	Store   *store.Store
	Sites   *sites.Registry
	Hub     *visitorhub.Hub
	Metrics *metrics.Set
	Brakes  *brakes.Brakes
	IPs     *clientip.Resolver // the client's address behind trusted proxies
	Pace    *Pacer             // new sockets a second, all sites (nil: unpaced)
	Log     *slog.Logger
	// Operators hears a visitor's typing and read marker (the inbox hub); nil: nobody.
	Operators Signals
	// Online says whether a site's operators are around (presence.Tracker); nil: never.
	Online func(siteID int64) bool
	// FirstFrame is how long a socket may send nothing after its hello (0: FirstFrameTimeout).
	FirstFrame time.Duration
	// ReadEach reads each socket on a goroutine of its own, as where there is no poller
	// (poller_linux.go): the tests of that path.
	ReadEach bool
	// PresenceChanges names sites whose Online may have changed (presence.go); nil: only
	// RunPresence's sweeps notice.
	PresenceChanges chan int64
	// Intake takes visitors' attachments (the site's quota, the disk's reserve), as it takes
	// operators'; nil: none are taken.
	Intake *files.Intake

	upgrader      fws.FastHTTPUpgrader // set by Register
	setup         gate                 // hellos and resumes at once (gate.go)
	storeFailedAt atomic.Int64         // when a failed write was last logged (unix ns)
	storeFailures atomic.Int64         // failed writes since then

	mu      sync.Mutex
	conns   map[*conn]struct{}
	bySite  map[int64]map[*conn]struct{} // the same sockets by site, for presence (presence.go)
	closing bool                         // CloseAll has begun: refuse new sockets
	active  sync.WaitGroup               // handlers still running

	presence  presence               // presence.go
	uploaders map[[32]byte]*uploader // uploaders.go, under mu
}

// CloseAll closes every socket with 1001 (going away), for a graceful stop. Clients
// reconnect and resume.
//
// It then waits, at most timeout, until every socket's handler has returned: a handler that
// had read a frame before its socket closed may still submit it, and the stop must flush
// after the last submission, or that message's jobs wait for the next start. New sockets are
// refused from here on. It reports whether every handler returned in time.
func (h *Handler) CloseAll(timeout time.Duration) bool {
	h.mu.Lock()
	h.closing = true
	list := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		list = append(list, c)
	}
	h.mu.Unlock()
	for _, c := range list {
		c.closeWith(fws.CloseGoingAway, "server restarting")
	}
	done := make(chan struct{})
	go func() { h.active.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// track adds (false once the handler is closing) or removes a socket of a site.
func (h *Handler) track(c *conn, siteID int64, add bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !add {
		delete(h.conns, c)
		if set := h.bySite[siteID]; set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(h.bySite, siteID)
			}
		}
		h.active.Done()
		return true
	}
	if h.closing {
		return false
	}
	if h.conns == nil {
		h.conns = make(map[*conn]struct{})
		h.bySite = make(map[int64]map[*conn]struct{})
	}
	h.conns[c] = struct{}{}
	set := h.bySite[siteID]
	if set == nil {
		set = make(map[*conn]struct{})
		h.bySite[siteID] = set
	}
	set[c] = struct{}{}
	h.active.Add(1)
	return true
}

// Signals carries what a visitor's window tells the site's operators without a message:
// typing (never stored) and the read marker (stored first). Both must not block.
type Signals interface {
	VisitorTyping(siteID, conversationID int64)
	VisitorSeen(siteID, conversationID, messageID int64)
	VisitorPage(siteID, conversationID int64, c *schema.VisitorContext)
	Rated(siteID, conversationID int64, rating, comment string)
}

// Register mounts the websocket route on app.
func (h *Handler) Register(app *fiber.App) {
	// Small per-socket buffers and a shared write-buffer pool (a socket holds a write buffer
	// only while writing): with thousands of idle sockets, per-socket memory is the RSS. The
	// upgrader is fasthttp/websocket's own, not contrib/websocket's wrapper, which copies every
	// header, cookie and query parameter of the handshake into maps kept for the socket's life.
	h.upgrader = fws.FastHTTPUpgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   1024,
		WriteBufferSize:  4096,
		WriteBufferPool:  &sync.Pool{},
		CheckOrigin:      func(*fasthttp.RequestCtx) bool { return true }, // check did, per site
	}
	app.Get("/v1/widget/ws", h.check, h.upgrade)
	app.Post("/v1/widget/check", h.preflight) // preflight.go
	app.Post(UploadPath, h.upload)            // upload.go
}

// upgrade turns a request that passed check into a socket served by serve.
func (h *Handler) upgrade(c *fiber.Ctx) error {
	site, _ := c.Locals("site").(*sites.Site)
	ip, _ := c.Locals("ip").(netip.Addr)
	// The request's memory is reused after the upgrade: what the socket keeps is copied.
	hs := upgradeReq{ip: ip, visitor: strings.Clone(c.Query("visitor")), origin: strings.Clone(c.Get(fiber.HeaderOrigin)),
		ua: strings.Clone(c.Get(fiber.HeaderUserAgent))}
	if len(hs.ua) > schema.MaxUserAgentLen {
		hs.ua = hs.ua[:schema.MaxUserAgentLen]
	}
	fctx := c.Context()
	err := h.upgrader.Upgrade(fctx, func(wc *fws.Conn) {
		// fasthttp holds the handshake's RequestCtx until this function returns, that is for
		// the socket's life. Nothing reads its request or response after the upgrade (site,
		// ip and visitor are copied above) and fasthttp resets both when it takes the context
		// back, so their buffers (headers, URI, query: ~3 KiB) are dropped now.
		fctx.Request = fasthttp.Request{}
		fctx.Response = fasthttp.Response{}
		defer func() {
			if p := recover(); p != nil {
				h.Log.Error("widget socket failed", "site", site.ID, "panic", p)
				_ = sockets.CloseNow(wc.NetConn())
			}
		}()
		h.serve(wc, site, hs)
	})
	if err != nil {
		// The upgrader has written its own status; the body says what to fix.
		return refuse(c, c.Response().StatusCode(), "bad_handshake", "This request is not a valid websocket handshake: "+err.Error())
	}
	return nil
}

// check refuses, before the upgrade, what must never become a socket: a missing or unknown
// site key (404), an Origin the site does not allow (403), a plain HTTP request (426).
func (h *Handler) check(c *fiber.Ctx) error {
	site := h.Sites.ByKey(c.Query("site"))
	if site == nil {
		return refuse(c, fiber.StatusNotFound, "unknown_site", "No site has this key: check data-site in the embed snippet.")
	}
	if !site.AllowsOrigin(c.Get(fiber.HeaderOrigin)) {
		return refuse(c, fiber.StatusForbidden, "origin_not_allowed",
			"This page's origin is not in the site's allowed origins: add it in the site's settings.")
	}
	if !fws.FastHTTPIsWebSocketUpgrade(c.Context()) {
		return refuse(c, fiber.StatusUpgradeRequired, "upgrade_required", "This endpoint speaks websocket only.")
	}
	ip := h.IPs.IP(c)
	if ok, wait := h.Brakes.NewSocket(site.ID, ip); !ok {
		secs := int(wait/time.Second) + 1
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		h.Metrics.FrameErrors.WithLabelValues(schema.CodeRateLimited).Inc()
		return refuse(c, fiber.StatusTooManyRequests, schema.CodeRateLimited,
			"Too many new chat connections from your network to this site; try again in "+strconv.Itoa(secs)+" seconds.")
	}
	wait, ok := h.Pace.Reserve(time.Now())
	if !ok {
		secs := int(wait/time.Second) + 1
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		h.Metrics.SocketsPaced.WithLabelValues("refused").Inc()
		return refuse(c, fiber.StatusServiceUnavailable, "busy",
			"The chat server is taking many connections at once; try again in "+strconv.Itoa(secs)+" seconds.")
	}
	if wait > 0 {
		// Waiting keeps the connection's setup slot (sockets.Listener.Setup): the rest of a
		// storm stays in the kernel's accept queue, not parsed and parked here.
		h.Metrics.SocketsPaced.WithLabelValues("waited").Inc()
		time.Sleep(wait)
	}
	c.Locals("site", site)
	c.Locals("ip", ip)
	return c.Next()
}

func refuse(c *fiber.Ctx, status int, code, msg string) error {
	return c.Status(status).JSON(schema.HTTPError{Code: code, Message: msg})
}

// session is one visitor's socket.
type session struct {
	h         *Handler
	c         *conn
	site      *sites.Site
	tokenHash []byte
	// Known once the first message is stored; written by the writer's goroutine (acked),
	// read by the socket's reader goroutine.
	visitorID atomic.Int64
	convID    atomic.Int64
	buf       []byte
	frame     schema.ClientFrame

	ip            netip.Addr
	bucket        brakes.Bucket          // this connection's frame rate
	signals       brakes.Bucket          // its typing and seen frames, apart: they never cost a message its turn
	refusedInARow int                    // frames refused by bucket since the last one admitted
	convStarting  atomic.Bool            // a first message is on its way: the next ones open no conversation (reset by a failed ack)
	planHold      func()                 // the plan's place for the conversation a first message opens, until it is submitted
	typedAt       int64                  // when a typing frame was last passed on (Brakes.Now)
	readID        int64                  // the visitor's read marker as stored
	claim         *store.Identity        // an unverified identify before the visitor was stored
	transcriptAt  int64                  // when the conversation was last asked for by email (Brakes.Now)
	origin        string                 // the handshake's Origin header ("" without one)
	ua            string                 // its User-Agent header
	ctx           *schema.VisitorContext // the page the visitor last reported (page.go)
	ctxUnsaved    bool                   // ctx is not stored yet: the next message stores it

	// Read by the poller (poller_linux.go): its frames are handled on the poller's
	// goroutine while polled, else on a goroutine of the socket's (a frame that may wait).
	polled     bool
	fragmented bool        // a message's first fragments are in buf
	binary     bool        // that message is a binary one
	first      atomic.Bool // a whole frame has been read
	pending    []byte      // a frame read in part
	rmu        sync.Mutex  // whoever handles the socket's frames holds it
	removed    bool        // the poller forgot the socket (under rmu)
	pollID     uint64      // the socket's key in the poller
	polling    atomic.Bool // the poller has the socket: its end is the session's
	silent     *time.Timer // FirstFrame's
	said       bool        // the hello went out: the operators heard the visitor came
	endOnce    sync.Once
	leaveOnce  sync.Once
}

// upgradeReq is what a socket keeps of its upgrade request.
type upgradeReq struct {
	ip                  netip.Addr
	visitor, origin, ua string
}

func (h *Handler) serve(wc *fws.Conn, site *sites.Site, hs upgradeReq) {
	wc.SetReadLimit(schema.MaxFrameBytes)
	cfg := h.Brakes.Config()
	s := &session{h: h, c: newConn(wc), site: site, ip: hs.ip, origin: hs.origin, ua: hs.ua,
		bucket: brakes.NewBucket(cfg.ConnMsgRate, cfg.ConnMsgBurst), signals: brakes.NewBucket(signalRate, signalBurst)}
	s.c.onClose = s.end // before anyone else has the socket
	h.Metrics.OpenSockets.Inc()
	if !h.track(s.c, site.ID, true) {
		s.c.closeWith(fws.CloseGoingAway, "server restarting")
		s.c.finish()
		_ = sockets.CloseNow(s.c.nc)
		h.Metrics.OpenSockets.Dec()
		return
	}
	if !s.hello(hs.visitor) {
		s.leave()
		return
	}
	s.said = true
	h.connected(site.ID, s.tokenHash, true)
	// A window says where it is (a page frame) right after its hello: a socket that says
	// nothing within FirstFrame is not a visitor's window, and gives its place back.
	firstFrame := cmp.Or(h.FirstFrame, FirstFrameTimeout)
	if p := thePoller(); p != nil && s.c.raw != nil && !h.ReadEach {
		// A client waits for the handshake's answer before it sends a frame (RFC 6455 §4.1);
		// one that did not left bytes in the handshake's buffers, which the poller never
		// reads. The library looks there first: with the deadline passed, it makes no read.
		_ = wc.SetReadDeadline(time.Now())
		var ne net.Error
		if _, _, err := wc.NextReader(); !errors.As(err, &ne) || !ne.Timeout() {
			h.Metrics.FrameErrors.WithLabelValues("protocol").Inc()
			s.c.closeWith(fws.CloseProtocolError, "frames sent before the handshake's answer")
			s.leave()
			return
		}
		if s.startPolling(p, firstFrame) {
			// The handler returns and fasthttp takes back the handshake's context and
			// buffers (it keeps hijacked connections: the socket is the session's to close);
			// leave runs once the socket ends.
			return
		}
		// The poller could not take the socket, and the library's reader is spent: the
		// socket goes, the client reconnects.
		s.c.closeWith(fws.CloseTryAgainLater, "unavailable")
		s.leave()
		return
	}
	defer s.leave()
	_ = wc.SetReadDeadline(time.Now().Add(firstFrame))
	first := true
	for {
		typ, r, err := wc.NextReader()
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, fws.ErrReadLimit):
				s.c.close() // the library has sent close 1009
			case first && errors.As(err, &ne) && ne.Timeout():
				s.closeSilent()
			}
			return
		}
		if first {
			first = false
			_ = wc.SetReadDeadline(time.Time{})
		}
		if typ != fws.TextMessage {
			s.refuseBinary()
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
			continue
		}
		if s.buf, err = readAll(r, s.buf[:0]); err != nil {
			return
		}
		if !s.validText(s.buf) {
			return
		}
		if !s.handle(s.buf) {
			return
		}
	}
}

// refuseBinary answers a binary message: the widget's frames are JSON text.
func (s *session) refuseBinary() {
	s.fail("", schema.CodeInvalid, "Frames must be JSON text frames.", 0)
}

// validText says whether a text message is UTF-8, else closes the socket with 1007.
func (s *session) validText(b []byte) bool {
	if utf8.Valid(b) {
		return true
	}
	s.h.Metrics.FrameErrors.WithLabelValues("invalid_utf8").Inc()
	s.c.closeWith(fws.CloseInvalidFramePayloadData, "text frames must be UTF-8")
	return false
}

// closeSilent closes a socket that sent no frame within FirstFrame of its hello.
func (s *session) closeSilent() {
	s.c.closeWith(fws.ClosePolicyViolation, "no frame after the hello")
}

// startPolling gives the socket to the poller; false if the poller could not take it.
func (s *session) startPolling(p *poller, firstFrame time.Duration) bool {
	s.polled = true
	s.silent = time.AfterFunc(firstFrame, func() {
		if !s.first.Load() {
			s.closeSilent()
		}
	})
	s.polling.Store(true) // from here on a closing socket ends the session (end)
	if !p.add(s) {
		s.polling.Store(false)
		s.polled = false
		return false
	}
	return true
}

// end has the socket's session leave, on a goroutine of its own, once: the poller found the
// socket closed or closing, or someone closed it (the conn's onClose). A socket read by a
// goroutine of its own leaves when that goroutine's read fails.
func (s *session) end() {
	if !s.polling.Load() {
		return
	}
	s.endOnce.Do(func() { go s.leave() })
}

// leave is the session's last act, once: the poller forgets the socket (after the frame it
// may be answering: a stop flushes after the last submission), the operators hear the
// visitor went, queued frames are written (a close frame within its second), and the socket
// is closed and forgotten.
func (s *session) leave() {
	s.leaveOnce.Do(func() {
		h := s.h
		if s.polling.Load() {
			thePoller().remove(s)
		}
		if s.silent != nil {
			s.silent.Stop()
		}
		if s.said {
			h.connected(s.site.ID, s.tokenHash, false)
		}
		if id := s.convID.Load(); id != 0 {
			h.Hub.Unsubscribe(id, s.c)
		}
		s.c.finish()
		_ = sockets.CloseNow(s.c.nc) // fasthttp keeps hijacked connections: each closes its own
		h.track(s.c, s.site.ID, false)
		h.Metrics.OpenSockets.Dec()
	})
}

func readAll(r io.Reader, b []byte) ([]byte, error) {
	if cap(b) == 0 { // a socket's buffer is made with its first frame: idle ones hold none
		b = make([]byte, 0, 512)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// hello identifies the visitor by token (a new one when missing or unknown) and sends the
// hello frame.
func (s *session) hello(token string) bool {
	var state store.VisitorState
	found := false
	if validToken(token) {
		sum := sha256.Sum256([]byte(token))
		s.tokenHash = sum[:]
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.h.setup.acquire() // the gate bounds the reads, never a send (a client may not read)
		state, found, err = s.h.Store.VisitorByToken(ctx, s.site.ID, s.tokenHash)
		s.h.setup.release()
		cancel()
		if err != nil {
			s.h.Log.Error("visitor lookup", "err", err)
			s.c.send(frames.Error(nil, "", schema.CodeUnavailable, "The chat is unavailable right now; try again shortly.", 2000))
			s.c.closeWith(fws.CloseTryAgainLater, "unavailable")
			return false
		}
	}
	if !found {
		token = newToken()
		sum := sha256.Sum256([]byte(token))
		s.tokenHash = sum[:]
	}
	s.visitorID.Store(state.VisitorID)
	s.convID.Store(state.ConversationID)
	s.readID = state.ReadMessageID
	if state.ConversationID != 0 {
		s.h.Hub.Subscribe(state.ConversationID, s.c)
	}
	status, opensAt := s.h.presenceOf(s.site, time.Now())
	return s.c.send(frames.Hello(nil, token, conversationOf(state), s.site.WindowJSON, status, opensAt))
}

// conversationOf is the part of a visitor's state that hello and identified send.
func conversationOf(st store.VisitorState) frames.ConversationState {
	return frames.ConversationState{ID: st.ConversationID, LastMessageID: st.LastMessageID, ReadMessageID: st.ReadMessageID,
		SeenMessageID: st.SeenMessageID, Status: schema.VisitorStatus(st.Status), Rating: st.Rating, HasEmail: st.HasEmail}
}

func newToken() string {
	b := make([]byte, schema.VisitorTokenLen*3/4)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func validToken(t string) bool {
	if len(t) != schema.VisitorTokenLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (s *session) fail(clientID, code, msg string, retryAfterMS int64) {
	s.h.Metrics.FrameErrors.WithLabelValues(code).Inc()
	frame := frames.Error(nil, clientID, code, msg, retryAfterMS)
	if s.polled {
		s.c.trySend(frame) // the poller's goroutine never waits for a socket's room
		return
	}
	s.c.send(frame)
}

// maxRefusedInARow is how many frames in a row a socket may send past its brake before it is
// closed: a client that ignores retry_after_ms only costs the server parsing.
const maxRefusedInARow = 50

// signalRate and signalBurst bound a connection's typing, seen and page frames (the widget
// sends a typing frame at most every 3 s, a seen frame when a reply is read, a page frame
// after each hello and when the page changes).
const (
	signalRate  = 1.0
	signalBurst = 5
)

// handle answers one frame; false closes the socket. Every frame, whatever its type and
// even if it does not parse, takes from one of the connection's buckets first: typing, seen
// and page from their own, everything else from the messages' one.
func (s *session) handle(data []byte) bool {
	received := time.Now()
	return s.answer(frames.ParseClient(data, &s.frame), received)
}

// answer answers the frame handle parsed into s.frame (perr: why it did not parse).
func (s *session) answer(perr error, received time.Time) bool {
	f := &s.frame
	bucket := &s.bucket
	if perr == nil && (f.Type == schema.FrameTyping || f.Type == schema.FrameSeen || f.Type == schema.FramePage) {
		bucket = &s.signals
	}
	if ok, wait := bucket.Take(s.h.Brakes.Now()); !ok {
		s.refusedInARow++
		if s.refusedInARow > maxRefusedInARow {
			s.h.Metrics.FrameErrors.WithLabelValues("too_many_refused").Inc()
			s.c.closeWith(fws.ClosePolicyViolation, "frames sent past retry_after_ms")
			return false
		}
		var clientID string
		if perr == nil && f.Type == schema.FrameMessage {
			clientID = f.ClientID
		}
		s.fail(clientID, schema.CodeRateLimited, "You are sending too fast; wait a moment and send again.", max(wait.Milliseconds(), 1))
		return true
	}
	s.refusedInARow = 0
	if perr != nil {
		s.fail("", schema.CodeInvalid, "The frame is not valid JSON: "+perr.Error()+".", 0)
		return true
	}
	switch f.Type {
	case schema.FrameMessage:
		s.message(f, received)
	case schema.FrameResume:
		s.resume(f.AfterMessageID)
	case schema.FrameEmail:
		s.email(f.Email) // email.go
	case schema.FrameTyping:
		s.typing() // seen.go
	case schema.FrameSeen:
		s.seen(f.MessageID) // seen.go
	case schema.FrameIdentify:
		s.identify(f) // identify.go
	case schema.FrameRate:
		s.rate(f.Rating, f.Comment) // rate.go
	case schema.FrameTranscript:
		s.transcript() // transcript.go
	case schema.FramePage:
		s.page(f) // page.go
	default:
		s.fail(f.ClientID, schema.CodeInvalid, `Unknown frame type; use "message", "resume", "email", "typing", "seen", "identify", "rate", "transcript" or "page".`, 0)
	}
	return true
}

func (s *session) message(f *schema.ClientFrame, received time.Time) {
	n := utf8.RuneCountInString(f.ClientID)
	if n == 0 || n > schema.MaxClientIDLen || schema.HasControl(f.ClientID) {
		s.fail("", schema.CodeInvalid, "client_id must be 1 to 64 characters, without control characters.", 0)
		return
	}
	f.Text = schema.CleanText(f.Text)
	if strings.TrimSpace(f.Text) == "" && f.File == "" {
		s.fail(f.ClientID, schema.CodeInvalid, "The message is empty.", 0)
		return
	}
	if utf8.RuneCountInString(f.Text) > schema.MaxTextRunes {
		s.fail(f.ClientID, schema.CodeTooLarge, "The message is longer than 4,000 characters.", 0)
		return
	}
	clientID := f.ClientID
	var file *store.File
	if f.File != "" {
		var ok bool
		if file, ok = s.file(clientID, f.File); !ok { // upload.go
			return
		}
	}
	admitted, starting := s.admitMessage(clientID)
	if !admitted {
		return
	}
	req := &store.MessageRequest{
		SiteID:         s.site.ID,
		VisitorID:      s.visitorID.Load(),
		TokenHash:      s.tokenHash,
		ConversationID: s.convID.Load(),
		Author:         schema.AuthorVisitor,
		Text:           f.Text,
		ClientID:       clientID,
		File:           file,
		Origin:         s.c,
	}
	if req.VisitorID == 0 {
		req.Claim = s.claim
	}
	req.Context = s.pageFor(req.VisitorID == 0)
	req.Done = func(r store.MessageResult) { s.acked(clientID, received, r) }
	if hold := s.planHold; hold != nil {
		// The conversation's place under the plan is held until its first message is
		// answered; the commit that stored it has counted it by then (a store Counter).
		req.Done = func(r store.MessageResult) { hold(); s.acked(clientID, received, r) }
	}
	if err := s.h.Store.SubmitMessage(req); err != nil {
		if starting {
			s.giveUpConversation()
		}
		s.fail(clientID, schema.CodeUnavailable, "The server is too busy to take the message now; send it again.", 1000)
		return
	}
	s.planHold = nil // the request's Done releases it now
}

// admitMessage applies the brakes of a message after the connection's (see handle): for a
// visitor's first message the new-conversation limits of (site, IP) and of the site, then the
// site's message cap. Nothing refused is stored. starting: this message is to open the
// visitor's conversation (until its answer, the next ones are not asked the new-conversation
// limits again).
func (s *session) admitMessage(clientID string) (admitted, starting bool) {
	refuse := func(code, msg string, wait time.Duration) (bool, bool) {
		s.fail(clientID, code, msg, max(wait.Milliseconds(), 1))
		return false, false
	}
	if s.convID.Load() == 0 && !s.convStarting.Load() {
		if ok, wait := s.h.Brakes.NewConversation(s.site.ID, s.ip); !ok {
			return refuse(schema.CodeRateLimited, "Too many new conversations from your network; try again later.", wait)
		}
		if ok, wait := s.site.Brake.AdmitConversation(); !ok {
			return refuse(schema.CodeBraked, "This site is receiving too many new conversations right now; try again shortly.", wait)
		}
		if s.h.Plans != nil {
			release, sentence := s.h.Plans.AdmitConversation(s.site.ID)
			if release == nil {
				return refuse(schema.CodePlanLimit, sentence, 0)
			}
			s.planHold = release
		}
		s.convStarting.Store(true)
		starting = true
	}
	if !s.admitSiteWrite(clientID) {
		if starting {
			s.giveUpConversation()
		}
		return false, false
	}
	return true, starting
}

// giveUpConversation undoes the admission of a first message that is not going to the
// writer after all: its place under the plan goes back, and the visitor's next message is
// asked the new-conversation limits again (it took from them, but opened nothing).
func (s *session) giveUpConversation() {
	if s.planHold != nil {
		s.planHold()
		s.planHold = nil
	}
	s.convStarting.Store(false)
}

// admitSiteWrite takes from the site's message cap for a write a visitor asks for (a message,
// an email, a rating), answering braked when the cap is spent.
func (s *session) admitSiteWrite(clientID string) bool {
	if ok, wait := s.site.Brake.AdmitMessage(); !ok {
		s.fail(clientID, schema.CodeBraked, "This site is receiving too many messages right now; try again shortly.", max(wait.Milliseconds(), 1))
		return false
	}
	return true
}

// write runs fn in the writer's next transaction and waits for its commit, as the socket's
// reader: the frames that need an answer after a write (email, seen, identify, rate).
func (s *session) write(fn func(*store.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.h.Store.Write(ctx, fn)
}

// logStoreError logs a failed write at most once a minute, with how many failed meanwhile: a
// full disk fails every message, and the log is on the same disk.
func (h *Handler) logStoreError(site int64, err error) {
	n := h.storeFailures.Add(1)
	now, last := time.Now().UnixNano(), h.storeFailedAt.Load()
	if now-last < int64(time.Minute) || !h.storeFailedAt.CompareAndSwap(last, now) {
		return
	}
	h.storeFailures.Add(-n)
	h.Log.Error("store message; visitors are answered unavailable", "site", site, "failed", n, "err", err)
}

// acked runs on the writer's goroutine after the commit: queue the ack, never wait.
func (s *session) acked(clientID string, received time.Time, r store.MessageResult) {
	if r.Err != nil {
		if s.convID.Load() == 0 {
			// No conversation was opened: the visitor's retry asks to open one again (and
			// takes a place under the plan again: this message's went back with its answer).
			s.convStarting.Store(false)
		}
		s.h.logStoreError(s.site.ID, r.Err)
		s.h.Metrics.FrameErrors.WithLabelValues(schema.CodeUnavailable).Inc()
		s.c.trySend(frames.Error(nil, clientID, schema.CodeUnavailable, "The message could not be saved; send it again.", 1000))
		return
	}
	if s.convID.Load() == 0 {
		// Messages queued before this ack carry conversation 0; the writer resolves them to
		// this same conversation.
		s.visitorID.Store(r.VisitorID)
		s.convID.Store(r.ConversationID)
		s.h.Hub.Subscribe(r.ConversationID, s.c)
	}
	s.c.trySend(frames.Ack(make([]byte, 0, 160), clientID, r.MessageID, r.ConversationID, r.CreatedAt))
	s.h.Metrics.AckLatency.Observe(time.Since(received).Seconds())
}

// resume sends every message after `after`, in order, holding live frames back meanwhile
// and sending those the resume did not cover afterwards.
func (s *session) resume(after int64) {
	if after < 0 {
		s.fail("", schema.CodeInvalid, "after_message_id must be 0 or more.", 0)
		return
	}
	convID := s.convID.Load()
	if convID == 0 {
		return // nothing stored yet: nothing to replay
	}
	c := s.c
	c.mu.Lock()
	c.resuming = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, hf := range c.held {
			if hf.id > c.lastSent {
				c.lastSent = hf.id
				c.trySend(hf.frame)
			}
		}
		c.held = nil
		c.resuming = false
		c.mu.Unlock()
	}()
	type sent struct {
		id    int64
		frame []byte
	}
	page := make([]sent, 0, resumePage)
	for {
		// A page is read under the gate, then sent without it: a client that stops reading
		// waits for room in its own queue, never holding every other socket's hello.
		page = page[:0]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.h.setup.acquire()
		err := s.h.Store.MessagesAfter(ctx, convID, after, resumePage, false, func(m *store.Message) error {
			after = m.ID
			page = append(page, sent{m.ID, frames.Message(nil, m.ID, m.Author, m.Name, m.Text, frames.VisitorClientID(m.Author, m.ClientID),
				m.CreatedAt, s.h.Hub.Files.ForVisitor(m.File, time.Now()))})
			return nil
		})
		s.h.setup.release()
		cancel()
		if err != nil {
			s.h.Log.Error("resume", "err", err)
			s.fail("", schema.CodeUnavailable, "History could not be read; send resume again.", 1000)
			return
		}
		for _, m := range page {
			if !c.send(m.frame) {
				return // gone
			}
			c.mu.Lock()
			c.lastSent = max(c.lastSent, m.id)
			c.mu.Unlock()
		}
		if len(page) < resumePage {
			return
		}
	}
}
