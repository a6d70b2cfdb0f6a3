package inbox

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
)

// entry is the request's operator's entry for an action, from the request's client address
// (through the trusted-proxy rules). An action that writes puts it in its own transaction
// (tx.Audit): the change and its entry commit together or not at all.
func (h *Handler) entry(c *fiber.Ctx, siteID int64, action store.AuditAction, detail map[string]any) store.AuditEntry {
	w := current(c)
	return h.entryAs(c, w.op.ID, w.op.Email, siteID, action, detail)
}

func (h *Handler) entryAs(c *fiber.Ctx, operatorID int64, actor string, siteID int64, action store.AuditAction, detail map[string]any) store.AuditEntry {
	return store.AuditEntry{SiteID: siteID, OperatorID: operatorID, Actor: actor, Address: h.IPs.IP(c).String(), Action: action, Detail: detail}
}

// audit writes the entry of an action that writes nothing else (a failed login, an export),
// in a commit of its own: a failure to write it is logged and the action stands.
func (h *Handler) audit(c *fiber.Ctx, e store.AuditEntry) {
	ctx, cancel := reqCtx(c)
	defer cancel()
	if err := h.Store.Audit(ctx, e); err != nil {
		h.Log.Warn("audit entry not written", "action", e.Action, "site", e.SiteID, "err", err)
	}
}

// settingsKeys are the JSON names of settingsUpdate's fields: the settings a change may name.
var settingsKeys = func() map[string]bool {
	t, keys := reflect.TypeFor[settingsUpdate](), map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys[name] = true
	}
	return keys
}()

// settingsFields are the names of the settings a request sent (never their values).
func settingsFields(body []byte) []string {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	var out []string
	for k := range raw {
		if settingsKeys[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// auditLog answers GET /sites/:site/audit?operator=&action=&from=&to=&before= (owners): the
// site's log, newest first, 100 a page (next: the before of the next page).
func (h *Handler) auditLog(c *fiber.Ctx) error {
	s, err := h.ownSite(c)
	if s == nil {
		return err
	}
	q := store.AuditQuery{Action: store.AuditAction(c.Query("action"))}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"operator", &q.OperatorID}, {"before", &q.Before}} {
		if v := c.Query(p.name); v != "" {
			if *p.dst, err = strconv.ParseInt(v, 10, 64); err != nil || *p.dst <= 0 {
				return fail(c, fiber.StatusBadRequest, "invalid", p.name+" must be an id (a number).")
			}
		}
	}
	if q.From, err = searchTime(c.Query("from"), false); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "from must be a date (2026-11-30) or a time (2026-11-30T09:00:00+01:00).")
	}
	if q.To, err = searchTime(c.Query("to"), true); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "to must be a date (2026-11-30) or a time (2026-11-30T18:00:00+01:00).")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	list, err := h.Store.AuditLog(ctx, s.ID, q)
	if err != nil {
		return busy(c, err)
	}
	out := fiber.Map{"site_id": s.ID, "entries": list}
	if len(list) == 100 {
		out["next"] = list[len(list)-1].ID
	}
	return c.JSON(out)
}
