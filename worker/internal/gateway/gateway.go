// Package gateway holds the Discord gateway for the sites this worker owns (a site's owner
// among the live workers, as partitions are owned: members.Owner), and turns an operator's
// reply in a conversation's Discord thread into a schema.Inbound on INBOUND, which the edge
// records. It speaks the gateway's documented protocol (v10, JSON): HELLO, IDENTIFY with
// the GUILD_MESSAGES and MESSAGE_CONTENT intents, READY, heartbeats and their ACKs, and
// MESSAGE_CREATE dispatches. A dropped connection, a missed heartbeat ACK or RECONNECT
// resumes the session (its id and the last sequence) at the URL READY gave, so Discord
// replays what was missed; INVALID_SESSION not resumable identifies again. A reply is
// published with its Discord id as the Nats-Msg-Id, and the edge stores it with that id as
// its client id: a replay never makes two messages.
//
// What is forwarded: a message by a person (not a bot, not a webhook, not this bot) written
// in a thread one of the site's conversations opened (the THREADS bucket's
// schema.DiscordThreadSiteKey, written by the worker that opened it), or a Discord reply to
// one of the site's webhook posts in a plain channel. "/close" and "/reopen" change the
// conversation's status; "note: …" is a note for operators. Everything else in the guild is
// ignored here, so INBOUND carries replies, not a server's chatter.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"spookat/schema"
	"spookat/worker/internal/deliver"
)

// DefaultURL is Discord's gateway, version 10 with JSON payloads.
const DefaultURL = "wss://gateway.discord.gg/?v=10&encoding=json"

// Intents: GUILD_MESSAGES and MESSAGE_CONTENT (privileged: enabled in the developer portal).
const intents = 1<<9 | 1<<15

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// Close codes after which reconnecting cannot help: the site's settings must change.
var fatal = map[int]string{
	4004: "Discord refused the bot token (authentication failed): set it again in the site's settings",
	4010: "invalid shard",
	4011: "the bot is in too many guilds to run without sharding",
	4012: "invalid gateway version",
	4013: "invalid intents",
	4014: "the bot's Message Content intent is not enabled: Discord developer portal, Bot → Privileged Gateway Intents",
}

// Threads answers which site a Discord thread belongs to ("" when none).
type Threads interface {
	SiteOfThread(ctx context.Context, thread string) (string, error)
}

// Files is where fetched attachments wait for the edge (the INBOUND_FILES object store).
type Files interface {
	Has(ctx context.Context, name string) (bool, error)
	Put(ctx context.Context, name string, data []byte) error
}

// Session is a site's gateway session as a resume needs it.
type Session struct {
	ID        string `json:"id"`
	ResumeURL string `json:"resume_url"`
	Seq       int64  `json:"seq"` // the last event handed over
}

// Sessions keeps each site's session where every worker reads it (the THREADS bucket,
// schema.DiscordSessionKey): the worker that takes a site over from one that died resumes
// its session, so Discord replays what came after the last reply handed over.
type Sessions interface {
	Load(ctx context.Context, siteID int64) (Session, error) // zero when none
	Save(ctx context.Context, siteID int64, s Session) error
}

// Config of the gateway connections.
type Config struct {
	URL     string // DefaultURL unless a test's mock
	Threads Threads
	// Sessions, if set, shares the sessions between workers (else each starts its own).
	Sessions Sessions
	// Files keeps the attachments fetched until the edge takes them; Download fetches one
	// (at most max bytes). Without them attachments are not forwarded.
	Files    Files
	Download func(ctx context.Context, url string, max int64) ([]byte, error)
	// AnyFileHost lets attachments come from any host (tests); else Discord's CDN only.
	AnyFileHost bool
	// Publish hands an Inbound to INBOUND; an error is retried until it passes or the
	// connection is being stopped.
	Publish func(ctx context.Context, in *schema.Inbound) error
	Log     *slog.Logger
	// Dialer defaults to websocket.DefaultDialer.
	Dialer *websocket.Dialer
	// OnFatal, if set, hears a site's gateway given up: Discord closed it with a code that
	// reconnecting cannot cure (a refused token, a disallowed intent).
	OnFatal func(siteID int64, code int, why string)
}

// Manager keeps one connection per owned site that has a bot token.
type Manager struct {
	cfg   Config
	mu    sync.Mutex
	conns map[int64]*conn
	wg    sync.WaitGroup
}

// New builds a Manager with no connection yet.
func New(cfg Config) *Manager {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Dialer == nil {
		cfg.Dialer = websocket.DefaultDialer
	}
	return &Manager{cfg: cfg, conns: map[int64]*conn{}}
}

// Set makes the connections those of owned (the sites this worker owns that take replies:
// a bot token and a webhook): a site no longer owned (or whose token or webhook changed) is
// closed, a new one is opened.
func (m *Manager) Set(ctx context.Context, owned []*schema.SiteDelivery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[int64]*schema.SiteDelivery{}
	for _, s := range owned {
		want[s.SiteID] = s
	}
	for id, c := range m.conns {
		if s := want[id]; s == nil || s.DiscordBotToken != c.site.DiscordBotToken || s.DiscordWebhook != c.site.DiscordWebhook {
			c.stop()
			delete(m.conns, id)
		}
	}
	for id, s := range want {
		if m.conns[id] != nil {
			continue
		}
		c := &conn{m: m, site: s, webhookID: webhookID(s.DiscordWebhook), log: m.cfg.Log.With("site", id)}
		c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
		m.conns[id] = c
		m.wg.Go(c.run)
	}
}

// Close stops every connection and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	for id, c := range m.conns {
		c.stop()
		delete(m.conns, id)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// webhookID is the id in a webhook URL (…/webhooks/<id>/<token>): the author of its posts.
func webhookID(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.Trim(p.Path, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "webhooks" {
			return parts[i+1]
		}
	}
	return ""
}

// conn is one site's gateway session, kept across reconnections.
type conn struct {
	m         *Manager
	site      *schema.SiteDelivery
	webhookID string
	log       *slog.Logger
	ctx       context.Context
	cancel    context.CancelFunc

	// The session, for RESUME: kept while Discord lets it be resumed. mu guards it against
	// the heartbeat's reads of seq.
	mu        sync.Mutex
	sessionID string
	resumeURL string
	seq       int64
	self      string // the bot's own user id
}

func (c *conn) stop() { c.cancel() }

type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d,omitempty"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// run connects until stopped. A session that got going (READY or RESUMED) is followed at
// once by the next (Discord asks for a prompt resume); attempts that fail back off. It starts
// by resuming the site's last session, if another worker held it.
func (c *conn) run() {
	if st := c.m.cfg.Sessions; st != nil {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		s, err := st.Load(ctx, c.site.SiteID)
		cancel()
		if err != nil {
			c.log.Warn("discord gateway: the last session not read; starting a new one", "err", err)
		} else if s.ID != "" {
			c.setSession(s.ID, s.ResumeURL, s.Seq)
		}
	}
	backoff := time.Second
	for c.ctx.Err() == nil {
		established, err := c.session()
		if c.ctx.Err() != nil {
			return
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if why, ok := fatal[ce.Code]; ok {
				c.log.Error("discord gateway: not reconnecting", "code", ce.Code, "why", why)
				if c.m.cfg.OnFatal != nil {
					c.m.cfg.OnFatal(c.site.SiteID, ce.Code, why)
				}
				return
			}
		}
		wait := backoff + time.Duration(rand.Int64N(int64(backoff/2)+1))
		if established {
			backoff, wait = time.Second, 0
		} else {
			backoff = min(backoff*2, time.Minute)
		}
		c.mu.Lock()
		resume := c.sessionID != ""
		c.mu.Unlock()
		c.log.Warn("discord gateway: connection ended; connecting again", "err", err, "resume", resume, "in", wait)
		select {
		case <-time.After(wait):
		case <-c.ctx.Done():
			return
		}
	}
}

// errReconnect ends a session so that run connects again (resuming when it can).
var errReconnect = errors.New("reconnect")

// session is one websocket connection: HELLO, IDENTIFY or RESUME, then dispatches until it
// drops. The reader only reads (so heartbeat ACKs are never left unread); a handler of its
// own looks up threads and hands replies to INBOUND, in order, and moves the sequence a
// resume starts from only past what it handed over. established: READY or RESUMED came.
func (c *conn) session() (established bool, err error) {
	c.mu.Lock()
	sessionID, resumeURL, seq := c.sessionID, c.resumeURL, c.seq
	c.mu.Unlock()
	u := c.m.cfg.URL
	if sessionID != "" && resumeURL != "" {
		u = withQuery(resumeURL, c.m.cfg.URL)
	}
	dctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
	ws, _, err := c.m.cfg.Dialer.DialContext(dctx, u, nil)
	cancel()
	if err != nil {
		return false, err
	}
	defer ws.Close()
	// Stopped (the site moved to another worker, or this one stops): closed with a code that
	// keeps the session resumable (1000 and 1001 would end it), for whoever takes over.
	stopped := context.AfterFunc(c.ctx, func() {
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "handing over"), time.Now().Add(time.Second))
		_ = ws.Close()
	})
	defer stopped()
	ws.SetReadLimit(1 << 20)

	var hello struct {
		HeartbeatInterval int64 `json:"heartbeat_interval"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var p payload
	if err := ws.ReadJSON(&p); err != nil {
		return false, err
	}
	if p.Op != opHello || json.Unmarshal(p.D, &hello) != nil || hello.HeartbeatInterval <= 0 {
		return false, fmt.Errorf("the gateway did not say hello (op %d)", p.Op)
	}
	interval := time.Duration(hello.HeartbeatInterval) * time.Millisecond

	var wmu sync.Mutex // one writer at a time: the heartbeat and the reader both write
	send := func(op int, d any) error {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return ws.WriteJSON(payload{Op: op, D: b})
	}
	token := strings.TrimPrefix(c.site.DiscordBotToken, "Bot ")
	if sessionID != "" {
		err = send(opResume, map[string]any{"token": token, "session_id": sessionID, "seq": seq})
	} else {
		err = send(opIdentify, map[string]any{"token": token, "intents": intents,
			"properties": map[string]string{"os": "linux", "browser": "spookat", "device": "spookat"}})
	}
	if err != nil {
		return false, err
	}

	// Heartbeats: the first after a random part of the interval (as Discord asks), then
	// every interval; one not ACKed by the next is a zombie connection: drop and resume.
	acked := make(chan struct{}, 1)
	beatNow := make(chan struct{}, 1)
	hbDone := make(chan struct{})
	defer close(hbDone)
	go func() {
		t := time.NewTimer(time.Duration(rand.Int64N(int64(interval))))
		defer t.Stop()
		waiting := false
		for {
			select {
			case <-hbDone:
				return
			case <-acked:
				waiting = false
				continue
			case <-beatNow:
			case <-t.C:
				if waiting {
					c.log.Warn("discord gateway: heartbeat not acknowledged; resuming")
					_ = ws.Close()
					return
				}
				t.Reset(interval)
			}
			waiting = true
			seq := c.currentSeq()
			if err := send(opHeartbeat, seq); err != nil {
				_ = ws.Close()
				return
			}
		}
	}()

	// The handler: what the reader queues, in order. At the session's end it finishes what
	// is queued (unless the conn is being stopped) before the next session starts.
	queue := make(chan payload, 256)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		for p := range queue {
			if c.handle(p) != nil {
				for range queue { // stopping: the rest is replayed to whoever resumes
				}
				return
			}
		}
	}()
	defer func() {
		close(queue)
		<-handled
	}()

	for {
		_ = ws.SetReadDeadline(time.Now().Add(interval + 30*time.Second))
		var p payload
		if err := ws.ReadJSON(&p); err != nil {
			return established, err
		}
		switch p.Op {
		case opHeartbeatACK:
			select {
			case acked <- struct{}{}:
			default:
			}
		case opHeartbeat:
			select {
			case beatNow <- struct{}{}:
			default:
			}
		case opReconnect:
			return established, errReconnect
		case opInvalidSession:
			var resumable bool
			_ = json.Unmarshal(p.D, &resumable)
			if !resumable {
				c.setSession("", "", 0)
			}
			// Discord asks for a wait of 1 to 5 seconds before identifying again.
			select {
			case <-time.After(time.Second + time.Duration(rand.Int64N(int64(4*time.Second)))):
			case <-c.ctx.Done():
			}
			return established, errors.New("invalid session")
		case opDispatch:
			switch p.T {
			case "READY":
				if err := c.ready(p.D); err != nil {
					return established, err
				}
				established = true
			case "RESUMED":
				established = true
				c.log.Info("discord gateway: resumed", "seq", c.currentSeq())
			}
			queue <- p
		}
	}
}

// handle is the handler's part of a dispatch: a reply handed to INBOUND, then the sequence
// moved past it. An error: the conn is stopping.
func (c *conn) handle(p payload) error {
	share := p.T == "READY"
	if p.T == "MESSAGE_CREATE" {
		var msg message
		if err := json.Unmarshal(p.D, &msg); err != nil {
			c.log.Warn("discord gateway: a MESSAGE_CREATE not understood", "err", err)
		} else if share, err = c.forward(&msg); err != nil {
			return err
		}
	}
	if p.S != nil {
		c.setSeq(*p.S)
	}
	if st := c.m.cfg.Sessions; share && st != nil {
		// After each reply handed over: a takeover resumes after it, not before.
		c.mu.Lock()
		s := Session{ID: c.sessionID, ResumeURL: c.resumeURL, Seq: c.seq}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		if err := st.Save(ctx, c.site.SiteID, s); err != nil {
			c.log.Warn("discord gateway: session not shared (a takeover would start a new one)", "err", err)
		}
		cancel()
	}
	return nil
}

func (c *conn) currentSeq() *int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq == 0 {
		return nil
	}
	s := c.seq
	return &s
}

func (c *conn) setSeq(s int64) {
	c.mu.Lock()
	if s > c.seq {
		c.seq = s
	}
	c.mu.Unlock()
}

func (c *conn) setSession(id, resume string, seq int64) {
	c.mu.Lock()
	c.sessionID, c.resumeURL, c.seq = id, resume, seq
	c.mu.Unlock()
}

// withQuery gives the resume URL READY named the query of the configured one (version,
// encoding), as Discord asks.
func withQuery(resume, configured string) string {
	r, err := url.Parse(resume)
	if err != nil {
		return configured
	}
	if c, err := url.Parse(configured); err == nil && r.RawQuery == "" {
		r.RawQuery = c.RawQuery
	}
	return r.String()
}

// A Discord message, as MESSAGE_CREATE carries it (the fields used).
type message struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
	Content   string `json:"content"`
	Timestamp string `json:"timestamp"`
	WebhookID string `json:"webhook_id"`
	Author    struct {
		ID         string `json:"id"`
		Username   string `json:"username"`
		GlobalName string `json:"global_name"`
		Bot        bool   `json:"bot"`
	} `json:"author"`
	Member *struct {
		Nick string `json:"nick"`
	} `json:"member"`
	Reference *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
	Referenced *struct {
		WebhookID string `json:"webhook_id"`
	} `json:"referenced_message"`
	Attachments []attachment `json:"attachments"`
}

type attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
}

// maxAttachments bounds the files forwarded from one message.
const maxAttachments = 4

// ready takes the session READY starts: its id and resume URL, and the bot's own user id.
func (c *conn) ready(d json.RawMessage) error {
	var r struct {
		SessionID string `json:"session_id"`
		ResumeURL string `json:"resume_gateway_url"`
		User      struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal(d, &r); err != nil {
		return err
	}
	c.mu.Lock()
	c.self = r.User.ID
	c.mu.Unlock()
	c.setSession(r.SessionID, r.ResumeURL, 0)
	c.log.Info("discord gateway: ready", "session", r.SessionID)
	return nil
}

// forward hands a message to INBOUND if it is a reply to one of the site's conversations
// (handed: it was), trying again while THREADS or INBOUND refuse; an error only when the
// conn is stopping.
func (c *conn) forward(msg *message) (handed bool, err error) {
	wait := 200 * time.Millisecond
	for {
		var list []outgoing
		list, err = c.inbound(msg)
		for _, o := range list {
			var skip bool
			if skip, err = c.fetch(o); err != nil {
				break
			}
			if skip {
				continue
			}
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			err = c.m.cfg.Publish(ctx, o.in)
			cancel()
			if err != nil {
				break
			}
		}
		if err == nil {
			return len(list) > 0, nil
		}
		c.log.Warn("discord reply not handed to INBOUND yet; trying again", "message", msg.ID, "err", err)
		select {
		case <-time.After(wait):
		case <-c.ctx.Done():
			return false, c.ctx.Err()
		}
		wait = min(wait*2, 10*time.Second)
	}
}

// outgoing is an event to hand over, and the URL of its file (fetched first).
type outgoing struct {
	in      *schema.Inbound
	fileURL string
}

// inbound is what to forward of a message: its text, then each attachment as an event of its
// own (id "<message's>:<attachment id>"); nothing when it is not a reply to a conversation of
// this site.
func (c *conn) inbound(msg *message) ([]outgoing, error) {
	c.mu.Lock()
	self := c.self
	c.mu.Unlock()
	if msg.Author.Bot || msg.WebhookID != "" || msg.Author.ID == self || msg.Author.ID == "" {
		return nil, nil // the bot's own posts, our webhook's, other bots': never echoed
	}
	in := &schema.Inbound{ID: "discord:" + msg.ChannelID + ":" + msg.ID, Source: schema.SourceDiscord, SiteID: c.site.SiteID}
	if msg.Reference != nil && msg.Referenced != nil && msg.Referenced.WebhookID != "" && msg.Referenced.WebhookID == c.webhookID {
		in.ReplyTo = msg.Reference.MessageID
	} else {
		site, err := c.m.cfg.Threads.SiteOfThread(c.ctx, msg.ChannelID)
		if err != nil {
			return nil, err
		}
		if site != fmt.Sprint(c.site.SiteID) {
			return nil, nil // not a thread of this site's conversations
		}
		in.Thread = msg.ChannelID
	}
	reply := schema.ParseReply(msg.Content)
	in.Kind, in.Internal, in.Text = reply.Kind, reply.Internal, reply.Text
	in.Author = msg.Author.GlobalName
	if msg.Member != nil && msg.Member.Nick != "" {
		in.Author = msg.Member.Nick
	}
	if in.Author == "" {
		in.Author = msg.Author.Username
	}
	if in.At, _ = time.Parse(time.RFC3339, msg.Timestamp); in.At.IsZero() {
		in.At = time.Now().UTC()
	}
	var list []outgoing
	if in.Kind != "" || in.Text != "" {
		list = append(list, outgoing{in: in})
	}
	if in.Kind != "" || c.m.cfg.Files == nil || c.m.cfg.Download == nil {
		return list, nil
	}
	for i, a := range msg.Attachments {
		if i == maxAttachments {
			break
		}
		// Discord serves attachments from its CDN; nothing else is fetched.
		if a.Size <= 0 || a.Size > schema.MaxInboundFileBytes || !AllowedURL(a.URL, c.m.cfg.AnyFileHost, "cdn.discordapp.com", "media.discordapp.net") {
			c.log.Info("discord attachment not forwarded", "message", msg.ID, "size", a.Size)
			continue
		}
		f := *in
		f.ID, f.Text = in.ID+":"+a.ID, ""
		f.File = &schema.InboundFile{Object: f.ID, Name: a.Filename, Type: a.ContentType, Size: a.Size}
		list = append(list, outgoing{in: &f, fileURL: a.URL})
	}
	return list, nil
}

// fetch puts an event's file into Files (once: a replay finds it there) before the event is
// published, so the edge never hears of a file it cannot read. skip: the file cannot be had.
func (c *conn) fetch(o outgoing) (skip bool, err error) {
	in := o.in
	if in.File == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	size, err := Keep(ctx, c.m.cfg.Files, in.File.Object, func() ([]byte, error) {
		data, err := c.m.cfg.Download(ctx, o.fileURL, in.File.Size)
		if err == nil && len(data) == 0 {
			err = fmt.Errorf("%w: empty", deliver.ErrNotFetchable)
		}
		return data, err
	})
	if errors.Is(err, deliver.ErrNotFetchable) {
		c.log.Info("discord attachment skipped", "id", in.ID, "err", err)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("download the attachment: %w", err)
	}
	if size > 0 {
		in.File.Size = size
	}
	return false, nil
}
