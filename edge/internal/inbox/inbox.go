// Package inbox serves the operators: login and sessions for the web inbox (/app/), the JSON
// API under /v1/api/ (session cookie + CSRF token from the inbox, or a per-operator API token
// from scripts), and the operator websocket /v1/api/ws that carries live changes. Every route
// that touches a site or a conversation checks that the operator is a member of the site, in
// the SQL that reads it. The routes are documented in schema/PROTOCOL.md.
package inbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/clientip"
	"spookat/edge/internal/files"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/edge/internal/visitorhub"
	"spookat/schema"
)

const (
	// CookieName is the session cookie.
	CookieName = "spookat_session"
	// CSRFHeader carries the session's CSRF token on every state-changing request.
	CSRFHeader = "X-CSRF-Token"
	// TokenPrefix starts every API token.
	TokenPrefix = "spk_"
	// SessionTTL is how long a session lives.
	SessionTTL = 14 * 24 * time.Hour
)

// Handler serves the inbox API and the operator websocket.
type Handler struct {
	// Plans, if set (an edge with -plans), bounds a site's team and retention by its plan,
	// and its settings show the plan and its use.
	Plans Plans
	Store *store.Store
	Sites *sites.Registry
	Hub   *Hub
	// Visitors is the visitors' live hub: an operator's typing and read marker reach the
	// conversation's widget sockets through it (nil: they reach nobody).
	Visitors *visitorhub.Hub
	Log      *slog.Logger
	// Limiter guards password checks (NewLimiter's by default).
	Limiter *Limiter
	// Metrics counts wrong passwords (nil: not counted).
	Metrics *metrics.Set
	// AllowPrivateTargets takes webhook and Discord URLs the worker's -allow-private-targets
	// would let through (http://, loopback, private addresses): labs and tests.
	AllowPrivateTargets bool
	// IPs finds the client's address behind trusted proxies (nil: the peer's).
	IPs *clientip.Resolver
	// Files keeps the attachments (GET /v1/api/files/{id}).
	Files files.Dir
	// Intake takes operators' attachments as the widget takes visitors' (nil: none taken).
	Intake *files.Intake
	// PublicURL is how browsers reach this edge: invitation links start with it.
	PublicURL string
	// PublishJob hands a job that belongs to no message (an invitation's email) to JOBS.
	PublishJob func(ctx context.Context, j *schema.Job) error

	typists   typists       // api.go
	searching chan struct{} // search.go
}

// who is the authenticated operator of a request.
type who struct {
	op       store.Operator
	csrf     string // "" for an API token
	session  []byte // session token hash, for logout
	token    []byte // API token hash
	apiToken bool
}

// Register mounts /v1/api/.
func (h *Handler) Register(app *fiber.App) {
	if h.Limiter == nil {
		h.Limiter = NewLimiter()
	}
	h.searching = make(chan struct{}, searchSlots)
	g := app.Group("/v1/api", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		c.Set("X-Content-Type-Options", "nosniff")
		return c.Next()
	})
	g.Post("/login", h.login)
	g.Post("/invites/peek", h.peekInvite) // invites.go: the invitee has no session yet
	g.Post("/invites/accept", h.acceptInvite)
	g.Get("/ws", h.auth, h.wsUpgrade, h.ws())
	g.Use(h.auth)
	g.Post("/logout", h.logout)
	g.Get("/me", h.me)
	g.Post("/me/password", h.changePassword)
	g.Get("/sites/:site/conversations", h.conversations)
	g.Get("/sites/:site/search", h.search)     // search.go
	g.Get("/sites/:site/canned", h.cannedList) // canned.go
	g.Post("/sites/:site/canned", h.cannedSave)
	g.Put("/sites/:site/canned/:id", h.cannedSave)
	g.Delete("/sites/:site/canned/:id", h.cannedDelete)
	g.Get("/sites/:site/settings", h.settings)
	g.Put("/sites/:site/settings", h.updateSettings)
	g.Get("/conversations/:id", h.conversation)
	g.Get("/conversations/:id/messages", h.messages)
	g.Post("/conversations/:id/messages", h.reply)
	g.Post("/conversations/:id/files", h.upload) // files.go
	g.Post("/conversations/:id/close", h.setStatus(schema.KindClosed))
	g.Post("/conversations/:id/reopen", h.setStatus(schema.KindReopened))
	g.Post("/conversations/:id/snooze", h.snooze) // assign.go
	g.Post("/conversations/:id/assign", h.assign) // assign.go
	g.Get("/sites/:site/members", h.members)      // assign.go
	g.Put("/sites/:site/members/:id", h.setRole)  // team.go
	g.Delete("/sites/:site/members/:id", h.removeMember)
	g.Get("/sites/:site/people/export", h.exportPerson) // people.go
	g.Delete("/sites/:site/people", h.erasePerson)
	g.Get("/sites/:site/reports", h.report) // reports.go
	g.Get("/sites/:site/audit", h.auditLog) // audit.go
	g.Get("/sites/:site/reports.csv", h.reportCSV)
	g.Get("/sites/:site/invites", h.invites) // invites.go
	g.Post("/sites/:site/invites", h.invite)
	g.Delete("/sites/:site/invites/:id", h.withdrawInvite)
	g.Get("/unread", h.unread) // assign.go
	g.Post("/conversations/:id/read", h.markRead)
	g.Post("/conversations/:id/typing", h.typing)
	g.Get("/files/:key", h.file) // files.go
	g.Get("/tokens", h.tokens)
	g.Post("/tokens", h.newToken)
	g.Delete("/tokens/:id", h.deleteToken)
	g.Use(func(c *fiber.Ctx) error {
		return fail(c, fiber.StatusNotFound, "not_found", "No such API route; see schema/PROTOCOL.md.")
	})
}

func fail(c *fiber.Ctx, status int, code, msg string) error {
	return c.Status(status).JSON(schema.HTTPError{Code: code, Message: msg})
}

func hashToken(t string) []byte {
	sum := sha256.Sum256([]byte(t))
	return sum[:]
}

func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func reqCtx(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), 10*time.Second)
}

// secure reports whether the browser reached us over TLS (directly or through a proxy that
// terminates it), so the cookie gets the Secure flag.
func secure(c *fiber.Ctx) bool {
	return c.Context().IsTLS() || strings.EqualFold(c.Get(fiber.HeaderXForwardedProto), "https")
}

// sameOrigin rejects cross-site requests carrying the session cookie: the Origin header, when
// present (every browser sends it on POST and websocket upgrades), must name this host.
func sameOrigin(c *fiber.Ctx) bool {
	o := c.Get(fiber.HeaderOrigin)
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && strings.EqualFold(u.Host, string(c.Request().Host()))
}

// auth identifies the operator by API token (Authorization: Bearer spk_…) or session cookie.
// A cookie-authenticated request that changes state must carry the session's CSRF token and
// come from this origin.
func (h *Handler) auth(c *fiber.Ctx) error {
	ctx, cancel := reqCtx(c)
	defer cancel()
	if a := c.Get(fiber.HeaderAuthorization); a != "" {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok || !strings.HasPrefix(tok, TokenPrefix) {
			return fail(c, fiber.StatusUnauthorized, "unauthorized", "Use Authorization: Bearer spk_… with an API token.")
		}
		th := hashToken(tok)
		op, found, err := h.Store.TokenOperator(ctx, th)
		if err != nil {
			return err
		}
		if !found {
			return fail(c, fiber.StatusUnauthorized, "unauthorized", "This API token is unknown or revoked.")
		}
		c.Locals("who", &who{op: op, token: th, apiToken: true})
		return c.Next()
	}
	cookie := c.Cookies(CookieName)
	if cookie == "" {
		return fail(c, fiber.StatusUnauthorized, "unauthorized", "Log in first.")
	}
	th := hashToken(cookie)
	op, csrf, found, err := h.Store.SessionOperator(ctx, th, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	if !found {
		c.ClearCookie(CookieName)
		return fail(c, fiber.StatusUnauthorized, "unauthorized", "Your session has ended; log in again.")
	}
	if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
		if !sameOrigin(c) || !store.CSRFEqual(c.Get(CSRFHeader), csrf) {
			return fail(c, fiber.StatusForbidden, "csrf", "Missing or wrong CSRF token; reload the inbox.")
		}
	}
	c.Locals("who", &who{op: op, csrf: csrf, session: th})
	return c.Next()
}

func current(c *fiber.Ctx) *who { return c.Locals("who").(*who) }

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (h *Handler) login(c *fiber.Ctx) error {
	if !sameOrigin(c) {
		return fail(c, fiber.StatusForbidden, "csrf", "Log in from the inbox's own page.")
	}
	var req loginRequest
	if err := c.BodyParser(&req); err != nil || req.Email == "" || req.Password == "" {
		return fail(c, fiber.StatusBadRequest, "invalid", "Give an email and a password.")
	}
	addr, account := h.IPs.IP(c).String(), strings.ToLower(strings.TrimSpace(req.Email))
	if refused, err := h.admitPassword(c, addr, account, "login"); refused {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	op, ok, err := h.Store.OperatorLogin(ctx, req.Email, req.Password)
	if err != nil {
		return err
	}
	if !ok {
		h.passwordFailed(addr, account, op.ID)
		h.audit(c, h.entryAs(c, op.ID, account, 0, store.AuditLoginFailed, nil))
		return fail(c, fiber.StatusUnauthorized, "unauthorized", "Wrong email or password.")
	}
	ns := startSession()
	e := h.entryAs(c, op.ID, op.Email, 0, store.AuditLogin, nil)
	if err := h.Store.Write(ctx, func(tx *store.Tx) error {
		if err := ns.add(tx, op.ID); err != nil {
			return err
		}
		return tx.Audit(e)
	}); err != nil {
		return err
	}
	return ns.answer(c, op)
}

// newSession is a login's session before it is stored: its token, CSRF token and end.
type newSession struct {
	token, csrf string
	expires     time.Time
}

func startSession() newSession {
	return newSession{randomToken(32), randomToken(24), time.Now().Add(SessionTTL)}
}

// add stores the session of the operator, in a write.
func (ns newSession) add(tx *store.Tx, operatorID int64) error {
	return tx.AddSession(hashToken(ns.token), operatorID, ns.csrf, ns.expires.UnixMilli())
}

// answer sets the session cookie and answers as a login does.
func (ns newSession) answer(c *fiber.Ctx, op any) error {
	c.Cookie(&fiber.Cookie{Name: CookieName, Value: ns.token, Path: "/", Expires: ns.expires, HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode, Secure: secure(c)})
	return c.JSON(fiber.Map{"operator": op, "csrf_token": ns.csrf})
}

// admitPassword applies the Limiter before a password is checked: refused, with the 429
// answered, when this address may not try now; else after the wait of an account someone
// is guessing.
func (h *Handler) admitPassword(c *fiber.Ctx, addr, account, what string) (refused bool, err error) {
	refuse, delay := h.Limiter.Admit(addr, account)
	if refuse > 0 {
		secs := int(refuse/time.Second) + 1
		c.Set(fiber.HeaderRetryAfter, itoa(secs))
		return true, fail(c, fiber.StatusTooManyRequests, "rate_limited",
			"Too many "+what+" attempts from this address; try again in "+itoa(secs)+" seconds.")
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	return false, nil
}

// passwordFailed counts a wrong password for the Limiter and the metrics.
func (h *Handler) passwordFailed(addr, account string, operatorID int64) {
	h.Limiter.Failed(addr, account)
	if h.Metrics != nil {
		id := "unknown"
		if operatorID != 0 {
			id = strconv.FormatInt(operatorID, 10)
		}
		h.Metrics.LoginFailures.WithLabelValues(id).Inc()
	}
}

func (h *Handler) logout(c *fiber.Ctx) error {
	w := current(c)
	e := h.entry(c, 0, store.AuditLogout, nil)
	if w.session != nil {
		ctx, cancel := reqCtx(c)
		defer cancel()
		if err := h.Store.Write(ctx, func(tx *store.Tx) error {
			if err := tx.DeleteSession(w.session); err != nil {
				return err
			}
			return tx.Audit(e)
		}); err != nil {
			return err
		}
		h.Hub.endSession(w.op.ID, w.session)
	} else {
		h.audit(c, e) // an API token's call: nothing else to write
	}
	c.Cookie(&fiber.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(1, 0), HTTPOnly: true,
		SameSite: fiber.CookieSameSiteLaxMode, Secure: secure(c)})
	return c.SendStatus(fiber.StatusNoContent)
}

func (h *Handler) me(c *fiber.Ctx) error {
	w := current(c)
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.OperatorSites(ctx, w.op.ID)
	if err != nil {
		return err
	}
	out := fiber.Map{"operator": w.op, "sites": list}
	if w.csrf != "" {
		out["csrf_token"] = w.csrf
	}
	return c.JSON(out)
}

var errForbidden = errors.New("forbidden")

// site resolves :site (a numeric id or a site key) to a site the operator is a member of:
// 404 for no such site, 403 for a site of others.
func (h *Handler) site(c *fiber.Ctx) (*sites.Site, error) {
	s, _, err := h.siteAs(c, store.RoleAgent)
	return s, err
}

// ownSite is site for what only the site's owners do (settings, channels, members): 403 for
// an agent.
func (h *Handler) ownSite(c *fiber.Ctx) (*sites.Site, error) {
	s, _, err := h.siteAs(c, store.RoleOwner)
	return s, err
}

// siteAs resolves :site for a member of it in role need (an owner may do what an agent may).
func (h *Handler) siteAs(c *fiber.Ctx, need store.Role) (*sites.Site, store.Role, error) {
	ref := c.Params("site")
	var s *sites.Site
	if id, err := parseID(ref); err == nil {
		s = h.Sites.ByID(id)
	} else {
		s = h.Sites.ByKey(ref)
	}
	if s == nil {
		return nil, "", fail(c, fiber.StatusNotFound, "not_found", "No such site.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	role, err := h.Store.MemberRole(ctx, current(c).op.ID, s.ID)
	switch {
	case err != nil:
		return nil, "", err
	case role == "":
		return nil, "", fail(c, fiber.StatusForbidden, "forbidden", "You are not a member of this site.")
	case need == store.RoleOwner && role != store.RoleOwner:
		return nil, "", fail(c, fiber.StatusForbidden, "forbidden", "Only the site's owners may do this; ask one of them.")
	}
	return s, role, nil
}

type passwordRequest struct {
	Current string `json:"current_password"`
	New     string `json:"new_password"`
}

// changePassword sets the operator's own password and ends every other session and every
// API token of theirs; the session that asked stays logged in.
func (h *Handler) changePassword(c *fiber.Ctx) error {
	w := current(c)
	if w.session == nil {
		return fail(c, fiber.StatusForbidden, "forbidden", "Change your password from the inbox (logged in), not with an API token.")
	}
	var req passwordRequest
	if err := c.BodyParser(&req); err != nil || req.Current == "" || req.New == "" {
		return fail(c, fiber.StatusBadRequest, "invalid", "Give current_password and new_password.")
	}
	if err := store.PasswordRule(req.New); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "The new password is not accepted: "+err.Error()+".")
	}
	addr, account := h.IPs.IP(c).String(), strings.ToLower(w.op.Email)
	if refused, err := h.admitPassword(c, addr, account, "password"); refused {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	ok, err := h.Store.CheckPassword(ctx, w.op.ID, req.Current)
	if err != nil {
		return err
	}
	if !ok {
		h.passwordFailed(addr, account, w.op.ID)
		return fail(c, fiber.StatusForbidden, "forbidden", "The current password is wrong.")
	}
	hash, err := store.HashPassword(req.New)
	if err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "The new password is not accepted: "+err.Error()+".")
	}
	e := h.entry(c, 0, store.AuditPasswordChanged, nil)
	if err := h.Store.WriteDurable(ctx, func(tx *store.Tx) error {
		if err := tx.SetOperatorPassword(w.op.ID, hash, w.session); err != nil {
			return err
		}
		return tx.Audit(e)
	}); err != nil {
		return err
	}
	h.Hub.endOthers(w.op.ID, w.session)
	return c.SendStatus(fiber.StatusNoContent)
}
