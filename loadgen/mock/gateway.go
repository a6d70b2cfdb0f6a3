package mock

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// DiscordGateway mocks Discord's gateway (v10, JSON) as Discord documents it: HELLO with the
// heartbeat interval; IDENTIFY, whose token is checked (a wrong one is closed with 4004, no
// MESSAGE_CONTENT intent with 4014) and answered with READY (session id, resume URL, the
// bot's user); heartbeats answered with ACKs; dispatches numbered by their sequence; RESUME,
// which replays what the session missed after the sequence it names and then says RESUMED,
// or INVALID_SESSION (not resumable) for a session it does not know. Tests post a person's
// message (Say), drop every connection without a close frame (Drop), ask for a reconnect
// (Reconnect), forget the sessions (Invalidate) and stop answering heartbeats (AckHeartbeats).
type DiscordGateway struct {
	Token     string        // the bot token it accepts
	Interval  time.Duration // heartbeat interval (Discord's is ~41 s)
	BotUserID string        // the bot's own user id, in READY
	URL       string        // its ws:// address, given as resume_gateway_url

	noAck      atomic.Bool
	identifies atomic.Int64
	resumes    atomic.Int64
	upgrader   websocket.Upgrader

	mu       sync.Mutex
	sessions map[string]*gwSession
	nextID   int
}

type gwSession struct {
	id     string
	seq    int64
	events []gwEvent // every dispatch of the session, for replays
	ws     *websocket.Conn
	wmu    *sync.Mutex
}

type gwEvent struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

// DiscordMessage is a MESSAGE_CREATE's message (the fields spookat reads).
type DiscordMessage struct {
	ID         string         `json:"id"`
	ChannelID  string         `json:"channel_id"`
	GuildID    string         `json:"guild_id,omitempty"`
	Content    string         `json:"content"`
	Timestamp  string         `json:"timestamp"`
	WebhookID  string         `json:"webhook_id,omitempty"`
	Author     DiscordUser    `json:"author"`
	Reference  *DiscordRef    `json:"message_reference,omitempty"`
	Referenced *DiscordParent `json:"referenced_message,omitempty"`
	// Attachments are files posted with the message, served from Discord's CDN.
	Attachments []DiscordAttachment `json:"attachments,omitempty"`
}

// DiscordAttachment is a file posted with a message.
type DiscordAttachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
}

// DiscordUser is a message's author.
type DiscordUser struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name,omitempty"`
	Bot        bool   `json:"bot,omitempty"`
}

// DiscordRef names the message a reply answers.
type DiscordRef struct {
	MessageID string `json:"message_id"`
	ChannelID string `json:"channel_id,omitempty"`
}

// DiscordParent is the message a reply answers, as Discord embeds it.
type DiscordParent struct {
	ID        string `json:"id"`
	WebhookID string `json:"webhook_id,omitempty"`
}

// NewDiscordGateway builds the mock; serve it with an httptest server and set URL to its
// ws:// address.
func NewDiscordGateway(token string, interval time.Duration) *DiscordGateway {
	return &DiscordGateway{Token: token, Interval: interval, BotUserID: "900000000000000001", sessions: map[string]*gwSession{}}
}

// Identifies and Resumes count the sessions started and resumed.
func (g *DiscordGateway) Identifies() int64 { return g.identifies.Load() }
func (g *DiscordGateway) Resumes() int64    { return g.resumes.Load() }

// AckHeartbeats turns the heartbeat ACKs on or off (off: a zombie connection).
func (g *DiscordGateway) AckHeartbeats(on bool) { g.noAck.Store(!on) }

// Connected is the number of sessions with a connection now.
func (g *DiscordGateway) Connected() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, s := range g.sessions {
		if s.ws != nil {
			n++
		}
	}
	return n
}

// Say dispatches MESSAGE_CREATE to every session: sent now where connected, kept for a
// resume where not.
func (g *DiscordGateway) Say(m DiscordMessage) {
	if m.Timestamp == "" {
		m.Timestamp = time.Now().UTC().Format(time.RFC3339)
	}
	d, _ := json.Marshal(m)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sessions {
		g.dispatch(s, "MESSAGE_CREATE", d)
	}
}

// Drop closes every connection without a close frame, as a network cut does.
func (g *DiscordGateway) Drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sessions {
		if s.ws != nil {
			_ = s.ws.UnderlyingConn().Close()
			s.ws = nil
		}
	}
}

// Reconnect sends RECONNECT (op 7) on every connection.
func (g *DiscordGateway) Reconnect() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.sessions {
		if s.ws != nil {
			send(s, gwEvent{Op: 7})
		}
	}
}

// Invalidate forgets every session: a connection gets INVALID_SESSION (not resumable).
func (g *DiscordGateway) Invalidate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, s := range g.sessions {
		if s.ws != nil {
			send(s, gwEvent{Op: 9, D: json.RawMessage("false")})
		}
		delete(g.sessions, id)
	}
}

// dispatch numbers an event in s and sends it if s is connected (g.mu held).
func (g *DiscordGateway) dispatch(s *gwSession, t string, d json.RawMessage) {
	s.seq++
	seq := s.seq
	ev := gwEvent{Op: 0, D: d, S: &seq, T: &t}
	s.events = append(s.events, ev)
	if s.ws != nil {
		send(s, ev)
	}
}

func send(s *gwSession, ev gwEvent) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = s.ws.WriteJSON(ev)
}

func (g *DiscordGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("v") != "10" || r.URL.Query().Get("encoding") != "json" {
		http.Error(w, "this mock speaks gateway v10 with encoding=json", http.StatusBadRequest)
		return
	}
	ws, err := g.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	wmu := &sync.Mutex{}
	hello, _ := json.Marshal(map[string]int64{"heartbeat_interval": g.Interval.Milliseconds()})
	wmu.Lock()
	_ = ws.WriteJSON(gwEvent{Op: 10, D: hello})
	wmu.Unlock()
	var first struct {
		Op int `json:"op"`
		D  struct {
			Token     string `json:"token"`
			Intents   int    `json:"intents"`
			SessionID string `json:"session_id"`
			Seq       int64  `json:"seq"`
		} `json:"d"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&first); err != nil {
		return
	}
	closeWith := func(code int, why string) {
		wmu.Lock()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, why), time.Now().Add(time.Second))
		wmu.Unlock()
	}
	if first.D.Token != g.Token {
		closeWith(4004, "Authentication failed.")
		return
	}
	g.mu.Lock()
	var s *gwSession
	switch first.Op {
	case 2: // IDENTIFY
		if first.D.Intents&(1<<15) == 0 || first.D.Intents&(1<<9) == 0 {
			g.mu.Unlock()
			closeWith(4014, "Disallowed intent(s).")
			return
		}
		g.identifies.Add(1)
		g.nextID++
		s = &gwSession{id: "session-" + strconv.Itoa(g.nextID), ws: ws, wmu: wmu}
		g.sessions[s.id] = s
		ready, _ := json.Marshal(map[string]any{"v": 10, "session_id": s.id, "resume_gateway_url": strings.TrimSuffix(g.URL, "/"),
			"user": map[string]any{"id": g.BotUserID, "username": "spookat-bot", "bot": true}, "guilds": []any{}})
		g.dispatch(s, "READY", ready)
	case 6: // RESUME
		s = g.sessions[first.D.SessionID]
		if s == nil {
			g.mu.Unlock()
			wmu.Lock()
			_ = ws.WriteJSON(gwEvent{Op: 9, D: json.RawMessage("false")})
			wmu.Unlock()
			return
		}
		g.resumes.Add(1)
		if s.ws != nil {
			_ = s.ws.UnderlyingConn().Close()
		}
		s.ws, s.wmu = ws, wmu
		for _, ev := range s.events {
			if *ev.S > first.D.Seq {
				send(s, ev)
			}
		}
		g.dispatch(s, "RESUMED", json.RawMessage("{}"))
	default:
		g.mu.Unlock()
		closeWith(4002, "Decode error: identify or resume first.")
		return
	}
	g.mu.Unlock()
	for {
		_ = ws.SetReadDeadline(time.Now().Add(g.Interval*2 + 5*time.Second))
		var p struct {
			Op int `json:"op"`
		}
		if err := ws.ReadJSON(&p); err != nil {
			break
		}
		if p.Op == 1 && !g.noAck.Load() {
			g.mu.Lock()
			if s.ws == ws {
				send(s, gwEvent{Op: 11})
			}
			g.mu.Unlock()
		}
	}
	g.mu.Lock()
	if s.ws == ws {
		s.ws = nil
	}
	g.mu.Unlock()
}
