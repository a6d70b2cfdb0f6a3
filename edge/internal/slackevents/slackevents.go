// Package slackevents takes replies from Slack: POST /v1/integrations/slack/events (Slack's
// Events API). Every request is verified with the signing secret of the site it concerns
// (slack-go's verifier: v0 HMAC-SHA256 over "v0:<timestamp>:<body>", timestamp within 5
// minutes), or refused with 401. The request is answered at once and the work is done after,
// so Slack's 3-second deadline is never at risk.
//
// A human reply in a conversation's thread (thread_ts = conversations.slack_thread, channel =
// the site's channel) becomes an operator message, saved by the edge's writer and pushed live
// to the visitor and the inbox. The bot's own posts (bot_id, or any subtype) are ignored, so
// nothing echoes. A reply starting with "note:" is stored as an internal note. The message's
// client id is "slack:<channel>:<ts>", so a retried event is stored once whatever the path
// (Slack's retries, two edges, a restart); its source (schema.SourceSlack) keeps the job
// publisher from posting it back to Slack.
//
// A reply that is just "/close" or "/reopen", or a ✅ (white_check_mark or heavy_check_mark)
// added to or removed from the thread's parent post, closes or reopens the conversation
// through the same writer as the inbox's buttons. The bot's own reactions (it adds ✅ to the
// parent when a conversation is closed anywhere) are told apart by the event's
// authorizations and ignored; a change to the status the conversation has is no change.
package slackevents

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/slack-go/slack"

	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// clientIDPrefix starts the client id of every message that came from Slack (ids stored
// before messages had a source kept it; it stays so that a retried event still matches).
const clientIDPrefix = "slack:"

// Handler serves the Events API endpoint.
type Handler struct {
	Store *store.Store
	Sites *sites.Registry
	Log   *slog.Logger
	// PublishJob hands JOBS the fetch of a file posted in a thread (a worker downloads it:
	// the edge makes no outside call); nil: files are not brought in.
	PublishJob func(ctx context.Context, j *schema.Job) error

	mu   sync.Mutex
	seen map[string]time.Time // event ids handled lately: Slack's retries are dropped early
	wg   sync.WaitGroup
}

// Register mounts the route.
func (h *Handler) Register(app *fiber.App) {
	app.Post("/v1/integrations/slack/events", h.serve)
}

// Wait waits for events being handled (graceful stop).
func (h *Handler) Wait() { h.wg.Wait() }

type envelope struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	EventID   string `json:"event_id"`
	Event     event  `json:"event"`
	// Authorizations name the app's own users: a reaction by one of them is the bot's.
	Authorizations []struct {
		UserID string `json:"user_id"`
		IsBot  bool   `json:"is_bot"`
	} `json:"authorizations"`
}

type event struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	BotID       string `json:"bot_id"`
	User        string `json:"user"`
	Text        string `json:"text"`
	Channel     string `json:"channel"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	UserProfile struct {
		DisplayName string `json:"display_name"`
		RealName    string `json:"real_name"`
	} `json:"user_profile"`
	// Files posted with a message (subtype file_share).
	Files []struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Mimetype string `json:"mimetype"`
		Size     int64  `json:"size"`
		URL      string `json:"url_private_download"`
	} `json:"files"`
	// reaction_added and reaction_removed
	Reaction string `json:"reaction"`
	Item     struct {
		Type    string `json:"type"`
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	} `json:"item"`
}

// isReaction reports a reaction_added or reaction_removed event.
func (e *event) isReaction() bool { return e.Type == "reaction_added" || e.Type == "reaction_removed" }

// channel is the channel the event happened in.
func (e *event) channel() string {
	if e.Channel != "" {
		return e.Channel
	}
	return e.Item.Channel
}

func unauthorized(c *fiber.Ctx) error {
	return c.Status(fiber.StatusUnauthorized).JSON(schema.HTTPError{Code: "unauthorized",
		Message: "The request is not signed with the signing secret of a site for this channel."})
}

// MaxBody is the largest event accepted: Slack's messages are 40,000 characters at most, and
// only 4,000 are kept.
const MaxBody = 256 << 10

func (h *Handler) serve(c *fiber.Ctx) error {
	if len(c.Body()) > MaxBody {
		return c.Status(fiber.StatusRequestEntityTooLarge).JSON(schema.HTTPError{Code: schema.CodeTooLarge,
			Message: "The event is larger than 256 KiB."})
	}
	body := append([]byte(nil), c.Body()...)
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		// Unverifiable without knowing the site; say no more than for a bad signature.
		return unauthorized(c)
	}
	key := c.Query("site")
	if key == "" && env.Event.channel() == "" {
		// Nothing names a site (url_verification has no channel): trying every site's secret
		// would let anyone make the edge compute one HMAC per site.
		return c.Status(fiber.StatusBadRequest).JSON(schema.HTTPError{Code: "site_required",
			Message: "This request names no site: set the Request URL in the Slack app's Event Subscriptions to …/v1/integrations/slack/events?site=<site key>."})
	}
	list := h.candidates(key, env.Event.channel())
	if len(list) == 0 {
		return unauthorized(c) // verified against nothing: no site has this key or channel
	}
	hdr := http.Header{}
	hdr.Set("X-Slack-Signature", c.Get("X-Slack-Signature"))
	hdr.Set("X-Slack-Request-Timestamp", c.Get("X-Slack-Request-Timestamp"))
	site := h.verify(hdr, body, list)
	if site == nil {
		return unauthorized(c)
	}
	switch env.Type {
	case "url_verification":
		return c.JSON(fiber.Map{"challenge": env.Challenge})
	case "event_callback":
	default:
		return c.SendStatus(fiber.StatusOK)
	}
	if env.EventID != "" && !h.first(env.EventID) {
		c.Set("X-Spookat-Duplicate", "1")
		return c.SendStatus(fiber.StatusOK) // a retry of an event handled already
	}
	if env.Event.isReaction() {
		for _, a := range env.Authorizations {
			if a.IsBot && a.UserID == env.Event.User {
				return c.SendStatus(fiber.StatusOK) // the bot's own ✅: its echo of a change
			}
		}
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.handle(site, &env.Event)
	}()
	return c.SendStatus(fiber.StatusOK)
}

// candidates are the sites a request may come from: the one named by ?site=<key>, else the
// sites whose Slack channel is the event's (one, unless sites share a channel).
func (h *Handler) candidates(key, channel string) []*sites.Site {
	if key != "" {
		if s := h.Sites.ByKey(key); s != nil && s.SlackSigningSecret != "" {
			return []*sites.Site{s}
		}
		return nil
	}
	var out []*sites.Site
	for _, s := range h.Sites.All() {
		if s.SlackSigningSecret != "" && s.SlackChannel == channel {
			out = append(out, s)
		}
	}
	return out
}

// verify returns the first candidate whose signing secret signed the request.
func (h *Handler) verify(hdr http.Header, body []byte, list []*sites.Site) *sites.Site {
	tried := map[string]bool{}
	for _, s := range list {
		if tried[s.SlackSigningSecret] {
			continue
		}
		tried[s.SlackSigningSecret] = true
		sv, err := slack.NewSecretsVerifier(hdr, s.SlackSigningSecret)
		if err != nil {
			return nil // missing headers or a timestamp outside the 5-minute window: same for every secret
		}
		if _, err := sv.Write(body); err != nil {
			continue
		}
		if sv.Ensure() == nil {
			return s
		}
	}
	return nil
}

// first records an event id and reports whether it is new.
func (h *Handler) first(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.seen == nil {
		h.seen = map[string]time.Time{}
	}
	if len(h.seen) > 10000 {
		for k, t := range h.seen {
			if now.Sub(t) > time.Hour {
				delete(h.seen, k)
			}
		}
	}
	if _, dup := h.seen[id]; dup {
		return false
	}
	h.seen[id] = now
	return true
}

// handle turns a human reply in a conversation's thread into an operator message, or a
// status command or ✅ into a status change.
func (h *Handler) handle(site *sites.Site, ev *event) {
	if ev.isReaction() {
		h.reaction(site, ev)
		return
	}
	if ev.Type != "message" || ev.BotID != "" || (ev.Subtype != "" && ev.Subtype != "thread_broadcast" && ev.Subtype != "file_share") {
		return // the bot's own posts, edits, joins…: never echoed
	}
	if ev.ThreadTS == "" || ev.ThreadTS == ev.TS || ev.Channel != site.SlackChannel || ev.User == "" {
		return // not a reply in a thread of this site's channel
	}
	// Slack's own composer takes a leading "/" for a slash command: typed with a space
	// before it (" /close") it is sent as a message, and ParseReply trims it.
	reply := schema.ParseReply(unescape(ev.Text))
	if reply.Kind != "" {
		h.setStatus(site, ev.ThreadTS, reply.Kind, name(ev))
		return
	}
	text, internal := reply.Text, reply.Internal
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	convID, found, err := h.Store.ConversationByThread(ctx, site.ID, ev.ThreadTS)
	if err == nil && found {
		h.fetchFiles(ctx, site, convID, ev, internal)
	}
	if text == "" {
		return // a file alone
	}
	if err != nil {
		h.Log.Error("slack reply: find conversation", "site", site.ID, "thread", ev.ThreadTS, "err", err)
		return
	}
	if !found {
		h.Log.Info("slack reply in a thread of no conversation; ignored", "site", site.ID, "thread", ev.ThreadTS)
		return
	}
	done := make(chan store.MessageResult, 1)
	if err := h.Store.SubmitMessage(&store.MessageRequest{
		SiteID: site.ID, ConversationID: convID, Author: schema.AuthorOperator, Name: name(ev), Text: text,
		Internal: internal, Source: schema.SourceSlack, ClientID: clientIDPrefix + ev.Channel + ":" + ev.TS,
		Done: func(r store.MessageResult) { done <- r },
	}); err != nil {
		h.Log.Error("slack reply: store", "site", site.ID, "err", err)
		return
	}
	select {
	case r := <-done:
		if r.Err != nil {
			h.Log.Error("slack reply: store", "site", site.ID, "err", r.Err)
		}
	case <-ctx.Done():
		h.Log.Error("slack reply: store timed out", "site", site.ID)
	}
}

// maxFiles bounds the files brought in from one message.
const maxFiles = 4

// fetchFiles publishes a fetch job for each file posted with a reply (Slack's own, up to 25
// MiB): a worker downloads it with the site's bot token and hands it back on INBOUND, and the
// edge stores it as an operator's attachment. The job goes to the conversation's partition,
// after the jobs of the messages before it.
func (h *Handler) fetchFiles(ctx context.Context, site *sites.Site, convID int64, ev *event, internal bool) {
	if h.PublishJob == nil {
		return
	}
	for i, f := range ev.Files {
		if i == maxFiles {
			break
		}
		if f.ID == "" || f.URL == "" || f.Size <= 0 || f.Size > schema.MaxInboundFileBytes || !token(f.ID) {
			h.Log.Info("slack file not brought in", "site", site.ID, "size", f.Size)
			continue
		}
		id := clientIDPrefix + ev.Channel + ":" + ev.TS + ":" + f.ID
		j := &schema.Job{ID: schema.FetchJobID(id), Lane: schema.LaneChat, Target: schema.TargetSlack, SiteID: site.ID,
			ConversationID: convID, Author: schema.AuthorOperator, CreatedAt: time.Now(),
			Fetch: &schema.Fetch{ID: id, URL: f.URL, Thread: ev.ThreadTS, Author: name(ev), Name: f.Name, Type: f.Mimetype, Size: f.Size, Internal: internal}}
		if err := h.PublishJob(ctx, j); err != nil {
			h.Log.Error("slack file: publish its fetch", "site", site.ID, "err", err)
		}
	}
}

// token: Slack's ids are letters and digits.
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != "" && len(s) <= 32
}

// done is the reaction that marks a conversation done.
func done(reaction string) bool {
	return reaction == "white_check_mark" || reaction == "heavy_check_mark"
}

// reaction closes (✅ added) or reopens (✅ removed) the conversation whose thread's parent
// post it is on. A ✅ on a reply in the thread is the operator's business: ignored.
func (h *Handler) reaction(site *sites.Site, ev *event) {
	if !done(ev.Reaction) || ev.Item.Type != "message" || ev.Item.Channel != site.SlackChannel || ev.User == "" {
		return
	}
	kind := schema.KindClosed
	if ev.Type == "reaction_removed" {
		kind = schema.KindReopened
	}
	// A reaction's event names only the user's id: the edge makes no call to Slack to
	// look the name up.
	h.setStatus(site, ev.Item.TS, kind, "Slack user "+ev.User)
}

// setStatus changes the status of the conversation whose thread is thread.
func (h *Handler) setStatus(site *sites.Site, thread string, kind schema.MessageKind, by string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	convID, found, err := h.Store.ConversationByThread(ctx, site.ID, thread)
	if err != nil {
		h.Log.Error("slack status: find conversation", "site", site.ID, "thread", thread, "err", err)
		return
	}
	if !found {
		return // a reaction on another post, or a thread of no conversation
	}
	if _, err := h.Store.SetStatus(ctx, site.ID, convID, kind, by, schema.SourceSlack); err != nil {
		h.Log.Error("slack status: store", "site", site.ID, "conversation", convID, "err", err)
	}
}

// name is who wrote a message, as Slack's event shows them.
func name(ev *event) string {
	if n := ev.UserProfile.DisplayName; n != "" {
		return n
	}
	if n := ev.UserProfile.RealName; n != "" {
		return n
	}
	return "Support"
}

// unescape undoes Slack's escaping of &, < and > in message text.
func unescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}
