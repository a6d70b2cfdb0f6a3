package inbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/frames"
	"spookat/edge/internal/plans"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/worker/egress"
)

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err == nil && id <= 0 {
		err = errors.New("ids are positive")
	}
	return id, err
}

func itoa(n int) string { return strconv.Itoa(n) }

func (h *Handler) conversations(c *fiber.Ctx) error {
	s, err := h.site(c)
	if s == nil {
		return err
	}
	status := schema.ConvStatus(c.Query("status", "open"))
	switch status {
	case schema.ConvOpen, schema.ConvSnoozed, schema.ConvClosed:
	case "all":
		status = ""
	default:
		return fail(c, fiber.StatusBadRequest, "invalid", "status must be open, snoozed, closed or all.")
	}
	assignee, ok := assigneeFilter(c)
	if !ok {
		return fail(c, fiber.StatusBadRequest, "invalid", "assignee must be me, unassigned or all.")
	}
	limit := c.QueryInt("limit", 100)
	if limit < 1 || limit > 500 {
		limit = 100
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.Conversations(ctx, current(c).op.ID, s.ID, status, assignee, limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"site_id": s.ID, "conversations": list})
}

// assigneeFilter reads ?assignee= (me, unassigned or all) as store.Conversations takes it.
func assigneeFilter(c *fiber.Ctx) (int64, bool) {
	switch c.Query("assignee", "all") {
	case "all":
		return store.AnyAssignee, true
	case "me":
		return current(c).op.ID, true
	case "unassigned":
		return store.Unassigned, true
	}
	return 0, false
}

// conv reads :id, a conversation the operator may see; 404 otherwise (another site's
// conversation looks exactly like one that does not exist).
func (h *Handler) conv(c *fiber.Ctx) (*store.ConversationSummary, error) {
	id, err := parseID(c.Params("id"))
	if err != nil {
		return nil, fail(c, fiber.StatusNotFound, "not_found", "No such conversation.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	cv, err := h.Store.Conversation(ctx, current(c).op.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fail(c, fiber.StatusNotFound, "not_found", "No such conversation.")
	}
	if err != nil {
		return nil, err
	}
	return &cv, nil
}

func (h *Handler) readMessages(c *fiber.Ctx, convID, after int64, limit int) ([]frames.OperatorMessage, error) {
	ctx, cancel := reqCtx(c)
	defer cancel()
	out := []frames.OperatorMessage{}
	err := h.Store.MessagesAfter(ctx, convID, after, limit, true, func(m *store.Message) error {
		out = append(out, frames.OperatorMessage{ID: m.ID, Author: m.Author, Name: m.Name, Text: m.Text, Internal: m.Internal, CreatedAt: m.CreatedAt,
			File: operatorFile(m.File), Kind: m.Kind, Reopened: m.Reopened})
		return nil
	})
	return out, err
}

func (h *Handler) conversation(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	msgs, err := h.readMessages(c, cv.ID, 0, 1000)
	if err != nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	ds, err := h.Store.Deliveries(ctx, cv.ID)
	if err != nil {
		return err
	}
	vc, err := h.Store.ConversationContext(ctx, cv)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"conversation": cv, "messages": msgs, "deliveries": ds, "context": vc})
}

func (h *Handler) messages(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	after := int64(c.QueryInt("after", 0))
	limit := c.QueryInt("limit", 200)
	if limit < 1 || limit > 1000 {
		limit = 200
	}
	msgs, err := h.readMessages(c, cv.ID, after, limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"conversation_id": cv.ID, "messages": msgs})
}

type replyRequest struct {
	Text     string `json:"text"`
	Internal bool   `json:"internal"`
	ClientID string `json:"client_id"`
	File     string `json:"file"` // an upload's id (POST /conversations/{id}/files); the text may then be empty
}

func (h *Handler) reply(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	var req replyRequest
	if err := c.BodyParser(&req); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "The body must be JSON: {\"text\": \"…\"}.")
	}
	req.Text = schema.CleanText(req.Text)
	if strings.TrimSpace(req.Text) == "" && req.File == "" {
		return fail(c, fiber.StatusBadRequest, "invalid", "The message is empty.")
	}
	if utf8.RuneCountInString(req.Text) > schema.MaxTextRunes {
		return fail(c, fiber.StatusRequestEntityTooLarge, schema.CodeTooLarge, "The message is longer than 4,000 characters.")
	}
	if len(req.ClientID) > schema.MaxClientIDLen {
		return fail(c, fiber.StatusBadRequest, "invalid", "client_id must be at most 64 characters.")
	}
	w := current(c)
	clientID := ""
	if req.ClientID != "" {
		clientID = "op" + strconv.FormatInt(w.op.ID, 10) + ":" + req.ClientID // idempotent retries
	}
	name := displayName(w.op)
	var file *store.File
	if req.File != "" {
		ctx, cancel := reqCtx(c)
		f, ok, err := h.replyFile(c, ctx, cv, req.File)
		cancel()
		if !ok {
			return err
		}
		file = f
	}
	done := make(chan store.MessageResult, 1)
	if err := h.Store.SubmitMessage(&store.MessageRequest{
		SiteID: cv.SiteID, ConversationID: cv.ID, Author: schema.AuthorOperator, Name: name,
		Text: req.Text, Internal: req.Internal, Source: schema.SourceInbox, ClientID: clientID, File: file,
		Done: func(r store.MessageResult) { done <- r },
	}); err != nil {
		return fail(c, fiber.StatusServiceUnavailable, schema.CodeUnavailable, "The server is too busy; send it again.")
	}
	var r store.MessageResult
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		return fail(c, fiber.StatusServiceUnavailable, schema.CodeUnavailable, "The reply was not confirmed in time; send it again (same client_id).")
	}
	if r.Err != nil {
		return r.Err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	_ = h.Store.Write(ctx, func(tx *store.Tx) error { return tx.MarkRead(w.op.ID, cv.ID, r.MessageID) })
	var wire *schema.File
	if file != nil {
		wire = operatorFile(file.Wire())
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"message": frames.OperatorMessage{ID: r.MessageID, Author: schema.AuthorOperator,
		Name: name, Text: req.Text, Internal: req.Internal, CreatedAt: r.CreatedAt, File: wire}, "duplicate": r.Duplicate})
}

func (h *Handler) setStatus(kind schema.MessageKind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		cv, err := h.conv(c)
		if cv == nil {
			return err
		}
		ctx, cancel := reqCtx(c)
		defer cancel()
		// The commit tells the inbox's and the visitor's sockets (their hubs read the status
		// message): nothing to send from here.
		if _, err := h.Store.SetStatus(ctx, cv.SiteID, cv.ID, kind, displayName(current(c).op), schema.SourceInbox); err != nil {
			return busy(c, err)
		}
		return c.JSON(fiber.Map{"id": cv.ID, "status": kind.Status()})
	}
}

func (h *Handler) markRead(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	var req struct {
		MessageID int64 `json:"message_id"`
	}
	_ = c.BodyParser(&req)
	if req.MessageID <= 0 || req.MessageID > cv.LastMessageID {
		req.MessageID = cv.LastMessageID
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	w := current(c)
	if err := h.Store.Write(ctx, func(tx *store.Tx) error { return tx.MarkRead(w.op.ID, cv.ID, req.MessageID) }); err != nil {
		return err
	}
	if h.Visitors != nil {
		h.Visitors.Signal(cv.ID, frames.Seen(nil, req.MessageID))
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// displayName is how an operator signs replies and typing.
func displayName(op store.Operator) string {
	if op.Name != "" {
		return op.Name
	}
	return op.Email
}

// typing tells the conversation's visitor and the site's other operators that this operator
// is writing. Repeats within half of schema.TypingEvery are answered 204 and passed on once.
func (h *Handler) typing(c *fiber.Ctx) error {
	cv, err := h.conv(c)
	if cv == nil {
		return err
	}
	w := current(c)
	if !h.typists.pass(w.op.ID, cv.ID, time.Now()) {
		return c.SendStatus(fiber.StatusNoContent)
	}
	name := displayName(w.op)
	if h.Visitors != nil {
		h.Visitors.Signal(cv.ID, frames.Typing(nil, name))
	}
	h.Hub.OperatorTyping(cv.SiteID, cv.ID, w.op.ID, name)
	return c.SendStatus(fiber.StatusNoContent)
}

// typists remembers when each (operator, conversation) last had its typing passed on.
type typists struct {
	mu   sync.Mutex
	last map[[2]int64]time.Time
}

func (t *typists) pass(operatorID, conversationID int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = make(map[[2]int64]time.Time)
	}
	k := [2]int64{operatorID, conversationID}
	if at, ok := t.last[k]; ok && now.Sub(at) < schema.TypingEvery/2 {
		return false
	}
	if len(t.last) >= 4096 { // forget what no longer shows anywhere
		for k, at := range t.last {
			if now.Sub(at) > schema.TypingLasts {
				delete(t.last, k)
			}
		}
	}
	t.last[k] = now
	return true
}

// Settings is a site's settings as the inbox shows them: secrets are never sent back, only
// whether they are set.
type Settings struct {
	ID                    int64                 `json:"id"`
	Key                   string                `json:"key"`
	Name                  string                `json:"name"`
	Origins               []string              `json:"origins"`
	SlackChannel          string                `json:"slack_channel"`
	SlackTokenSet         bool                  `json:"slack_token_set"`
	SlackSigningSecretSet bool                  `json:"slack_signing_secret_set"`
	DiscordWebhookSet     bool                  `json:"discord_webhook_set"`
	DiscordBotTokenSet    bool                  `json:"discord_bot_token_set"`
	WebhookURL            string                `json:"webhook_url"`
	WebhookSecretSet      bool                  `json:"webhook_secret_set"`
	NotifyEmail           string                `json:"notify_email"`
	IdentitySecretSet     bool                  `json:"identity_secret_set"`
	Widget                schema.WidgetSettings `json:"widget"`
	RetentionDays         int                   `json:"retention_days"`
	// Plan is the site's plan and its use this month (an edge with -plans only).
	Plan *plans.Usage `json:"plan,omitempty"`
}

func settingsOf(s *store.Site) Settings {
	o := s.Origins
	if o == nil {
		o = []string{}
	}
	return Settings{ID: s.ID, Key: s.Key, Name: s.Name, Origins: o, SlackChannel: s.SlackChannel,
		SlackTokenSet: s.SlackToken != "", SlackSigningSecretSet: s.SlackSigningSecret != "",
		DiscordWebhookSet: s.DiscordWebhook != "", DiscordBotTokenSet: s.DiscordBotToken != "", WebhookURL: s.WebhookURL, WebhookSecretSet: s.WebhookSecret != "",
		NotifyEmail: s.NotifyEmail, IdentitySecretSet: s.IdentitySecret != "", Widget: s.Widget, RetentionDays: s.RetentionDays}
}

func (h *Handler) settings(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	row, err := h.Store.SiteByID(ctx, s.ID)
	if err != nil {
		return err
	}
	out := settingsOf(row)
	if h.Plans != nil {
		u := h.Plans.Usage(s.ID)
		out.Plan = &u
	}
	return c.JSON(out)
}

// settingsUpdate changes what it names: a missing field keeps its value; a secret given as ""
// is removed.
type settingsUpdate struct {
	Name               *string   `json:"name"`
	Origins            *[]string `json:"origins"`
	SlackToken         *string   `json:"slack_token"`
	SlackChannel       *string   `json:"slack_channel"`
	SlackSigningSecret *string   `json:"slack_signing_secret"`
	DiscordWebhook     *string   `json:"discord_webhook"`
	// DiscordBotToken: a worker holds the Discord gateway with it, so replies come back.
	DiscordBotToken *string `json:"discord_bot_token"`
	WebhookURL      *string `json:"webhook_url"`
	WebhookSecret   *string `json:"webhook_secret"`
	NotifyEmail     *string `json:"notify_email"`
	IdentitySecret  *string `json:"identity_secret"`
	// Widget replaces the window's settings as a whole when present.
	Widget *schema.WidgetSettings `json:"widget"`
	// RetentionDays: conversations idle this long are deleted; 0 keeps them.
	RetentionDays *int `json:"retention_days"`
}

func (h *Handler) updateSettings(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	var u settingsUpdate
	if err := c.BodyParser(&u); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "The body must be a JSON object of settings.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	var row *store.Site
	err = h.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		// Read inside the writer's transaction, so two updates never undo each other.
		cur, err := tx.SiteByID(s.ID)
		if err != nil {
			return err
		}
		if u.Widget != nil {
			if err := u.Widget.Check(); err != nil {
				return badRequest(sentence(err))
			}
			cur.Widget = *u.Widget
		}
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = strings.TrimSpace(*v)
			}
		}
		set(&cur.Name, u.Name)
		set(&cur.SlackToken, u.SlackToken)
		set(&cur.SlackChannel, u.SlackChannel)
		set(&cur.SlackSigningSecret, u.SlackSigningSecret)
		set(&cur.DiscordWebhook, u.DiscordWebhook)
		set(&cur.DiscordBotToken, u.DiscordBotToken)
		set(&cur.WebhookURL, u.WebhookURL)
		set(&cur.WebhookSecret, u.WebhookSecret)
		set(&cur.NotifyEmail, u.NotifyEmail)
		set(&cur.IdentitySecret, u.IdentitySecret)
		if u.RetentionDays != nil {
			if d := *u.RetentionDays; d < 0 || d > store.MaxRetentionDays {
				return badRequest(fmt.Sprintf("retention_days must be between 0 (keep conversations) and %d; it is the days a conversation is kept after its last message.", store.MaxRetentionDays))
			}
			if h.Plans != nil {
				if err := h.Plans.CheckRetention(s.ID, *u.RetentionDays); err != nil {
					return badRequest("retention_days: " + sentence(err))
				}
			}
			cur.RetentionDays = *u.RetentionDays
		}
		if u.IdentitySecret != nil && cur.IdentitySecret != "" && len(cur.IdentitySecret) < 16 {
			return badRequest("identity_secret must be at least 16 characters: generate one, e.g. openssl rand -hex 32.")
		}
		if u.Origins != nil {
			cur.Origins = cur.Origins[:0]
			for _, o := range *u.Origins {
				if strings.TrimSpace(o) == "" {
					continue
				}
				n, err := store.NormalizeOrigin(o)
				if err != nil {
					return badRequest(sentence(err))
				}
				cur.Origins = append(cur.Origins, n)
			}
		}
		if u.SlackChannel != nil && cur.SlackChannel != "" {
			if err := store.CheckSlackChannel(cur.SlackChannel); err != nil {
				return badRequest(sentence(err))
			}
		}
		if u.SlackToken != nil && cur.SlackToken != "" {
			if err := store.CheckSlackToken(cur.SlackToken); err != nil {
				return badRequest(sentence(err))
			}
		}
		if u.NotifyEmail != nil && cur.NotifyEmail != "" {
			if err := store.CheckEmail(cur.NotifyEmail); err != nil {
				return badRequest("notify_email " + sentence(err))
			}
		}
		switch {
		case cur.Name == "":
			return badRequest("A site needs a name.")
		case len(cur.Origins) == 0:
			return badRequest("A site needs at least one allowed origin (https://example.com, or * for development).")
		case cur.DiscordBotToken != "" && cur.DiscordWebhook == "":
			return badRequest("A Discord bot token needs the site's Discord webhook: replies come from the threads its posts open.")
		case cur.DiscordBotToken != "" && (len(cur.DiscordBotToken) < 30 || len(cur.DiscordBotToken) > 200 || strings.ContainsAny(cur.DiscordBotToken, " \t\r\n")):
			return badRequest("discord_bot_token is not a bot token: copy it from the Discord developer portal, Bot → Reset Token (without \"Bot \").")
		case cur.WebhookURL != "" && cur.WebhookSecret == "":
			return badRequest("A webhook URL needs a webhook secret.")
		}
		if err := h.checkTargets(cur); err != nil {
			return err
		}
		row = cur
		if err := tx.UpdateSite(cur); err != nil {
			return err
		}
		return tx.Audit(h.entry(c, s.ID, store.AuditSettingsChanged, map[string]any{"fields": settingsFields(c.Body())}))
	})
	var br badRequest
	if errors.As(err, &br) {
		return fail(c, fiber.StatusBadRequest, "invalid", string(br))
	}
	if err != nil {
		return err
	}
	if err := h.Sites.Put(ctx, row); err != nil {
		h.Log.Error("publish site settings", "site", row.ID, "err", err)
	}
	return c.JSON(settingsOf(row))
}

// checkTargets refuses the webhook and Discord URLs the worker would refuse (package egress),
// so the operator hears it now rather than from a dead delivery. The message never repeats a
// URL: the Discord webhook's path is a secret.
func (h *Handler) checkTargets(s *store.Site) error {
	if s.WebhookURL != "" {
		if err := egress.CheckWebhookURL(s.WebhookURL, h.AllowPrivateTargets); err != nil {
			return badRequest("webhook_url " + err.Error() + ", for example " + egress.WebhookExample + ".")
		}
	}
	if s.DiscordWebhook != "" {
		if err := egress.CheckDiscordURL(s.DiscordWebhook, h.AllowPrivateTargets); err != nil {
			return badRequest("discord_webhook " + err.Error() + ", for example " + egress.DiscordExample + ".")
		}
	}
	return nil
}

type badRequest string

// sentence makes a store check's error a sentence for the settings page.
func sentence(err error) string {
	m := err.Error()
	return strings.ToUpper(m[:1]) + m[1:] + "."
}

func (b badRequest) Error() string { return string(b) }

func (h *Handler) tokens(c *fiber.Ctx) error {
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.APITokens(ctx, current(c).op.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"tokens": list})
}

func (h *Handler) newToken(c *fiber.Ctx) error {
	var req struct {
		Name string `json:"name"`
	}
	_ = c.BodyParser(&req)
	if len(req.Name) > 100 {
		return fail(c, fiber.StatusBadRequest, "invalid", "The name is too long.")
	}
	tok := TokenPrefix + randomToken(24)
	ctx, cancel := reqCtx(c)
	defer cancel()
	var id int64
	w := current(c)
	if err := h.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if id, err = tx.AddAPIToken(w.op.ID, hashToken(tok), strings.TrimSpace(req.Name)); err != nil {
			return err
		}
		return tx.Audit(h.entry(c, 0, store.AuditTokenCreated, map[string]any{"token_id": id}))
	}); err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{"id": id, "name": req.Name, "token": tok})
}

func (h *Handler) deleteToken(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"))
	if err != nil {
		return fail(c, fiber.StatusNotFound, "not_found", "No such token.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	w := current(c)
	var th []byte
	if err := h.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		var err error
		if th, err = tx.DeleteAPIToken(w.op.ID, id); err != nil || th == nil {
			return err
		}
		return tx.Audit(h.entry(c, 0, store.AuditTokenDeleted, map[string]any{"token_id": id}))
	}); err != nil {
		return err
	}
	if th != nil {
		h.Hub.endToken(w.op.ID, th)
	}
	return c.SendStatus(fiber.StatusNoContent)
}
