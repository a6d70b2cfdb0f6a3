package inbox

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// searchSlots bounds the searches running at once across all operators, so a burst of them
// (an operator typing fast in three tabs) leaves read connections for the visitors' history
// and the inbox's lists.
const searchSlots = 2

// search answers GET /sites/:site/search?q=&status=&assignee=&from=&to=&before=: the
// site's conversations whose messages match q, the newest match first, each with a
// highlighted snippet, and (first page) those whose visitor's name, email or user id do.
func (h *Handler) search(c *fiber.Ctx) error {
	s, err := h.site(c)
	if s == nil {
		return err
	}
	q := store.SearchQuery{Text: c.Query("q")}
	switch st := schema.ConvStatus(c.Query("status", "all")); st {
	case schema.ConvOpen, schema.ConvSnoozed, schema.ConvClosed:
		q.Status = st
	case "all":
	default:
		return fail(c, fiber.StatusBadRequest, "invalid", "status must be open, snoozed, closed or all.")
	}
	switch assignee, ok := assigneeFilter(c); {
	case !ok:
		return fail(c, fiber.StatusBadRequest, "invalid", "assignee must be me, unassigned or all.")
	case assignee == store.Unassigned:
		q.Unassigned = true
	case assignee > 0:
		q.AssignedTo = assignee
	}
	if q.From, err = searchTime(c.Query("from"), false); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "from must be a date (2026-11-30) or a time (2026-11-30T09:00:00+01:00).")
	}
	if q.To, err = searchTime(c.Query("to"), true); err != nil {
		return fail(c, fiber.StatusBadRequest, "invalid", "to must be a date (2026-11-30) or a time (2026-11-30T18:00:00+01:00).")
	}
	if v := c.Query("before"); v != "" {
		if q.Before, err = strconv.ParseInt(v, 10, 64); err != nil || q.Before <= 0 {
			return fail(c, fiber.StatusBadRequest, "invalid", "before must be the next of the page before (a message id).")
		}
	}
	if q.From > 0 && q.To > 0 && q.From > q.To {
		return fail(c, fiber.StatusBadRequest, "invalid", "from must be before to.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	select {
	case h.searching <- struct{}{}:
		defer func() { <-h.searching }()
	case <-ctx.Done():
		return fail(c, fiber.StatusServiceUnavailable, "busy", "Search is busy; try again in a moment.")
	}
	res, err := h.Store.Search(ctx, current(c).op.ID, s.ID, q)
	if errors.Is(err, store.ErrBadQuery) {
		return fail(c, fiber.StatusBadRequest, "invalid", err.Error())
	}
	if err != nil {
		return err
	}
	return c.JSON(res)
}

// searchTime reads a bound of the search: empty is none, a date is that day in UTC (its
// start for from, its last millisecond for to), a time is that instant.
func searchTime(v string, end bool) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			d = d.AddDate(0, 0, 1).Add(-time.Millisecond)
		}
		return d.UnixMilli(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || t.UnixMilli() <= 0 {
		return 0, errors.New("not a time")
	}
	return t.UnixMilli(), nil
}
