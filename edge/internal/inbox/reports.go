package inbox

import (
	"encoding/csv"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
)

// Reports (owners): GET /sites/:site/reports?from=&to=&by=day|week as JSON, and
// /sites/:site/reports.csv (the same rows, rows=periods or rows=operators) for a
// spreadsheet. Days, weeks and hours are the site's time zone's (its office hours' zone).

// maxReportDays bounds what one report reads.
const maxReportDays = 366

// reportQuery reads the site and the span; when it answers the request itself (not an owner,
// a bad parameter) s is nil and the error is the answer's.
func (h *Handler) reportQuery(c *fiber.Ctx) (*sites.Site, store.ReportQuery, error) {
	s, err := h.ownSite(c)
	if s == nil {
		return nil, store.ReportQuery{}, err
	}
	q, bad := reportSpan(c, s.Widget.OfficeHours().Loc)
	if bad != "" {
		return nil, q, fail(c, fiber.StatusBadRequest, "invalid", bad)
	}
	return s, q, nil
}

func reportSpan(c *fiber.Ctx, loc *time.Location) (store.ReportQuery, string) {
	q := store.ReportQuery{Loc: loc}
	switch c.Query("by", "day") {
	case "day":
	case "week":
		q.Weekly = true
	default:
		return q, "by must be day or week."
	}
	day := func(v string) (time.Time, bool) {
		d, err := time.ParseInLocation(time.DateOnly, v, q.Loc)
		return d, err == nil
	}
	now := time.Now().In(q.Loc)
	q.To = time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, q.Loc) // the end of today
	if v := c.Query("to"); v != "" {
		d, ok := day(v)
		if !ok {
			return q, "to must be a date, e.g. 2026-12-01 (the last day in the report)."
		}
		q.To = d.AddDate(0, 0, 1)
	}
	q.From = q.To.AddDate(0, 0, -30)
	if v := c.Query("from"); v != "" {
		d, ok := day(v)
		if !ok {
			return q, "from must be a date, e.g. 2026-11-01 (the first day in the report)."
		}
		q.From = d
	}
	switch {
	case !q.From.Before(q.To):
		return q, "from must be on or before to."
	case q.To.Sub(q.From) > maxReportDays*24*time.Hour+time.Hour: // a summer-time day is 25 hours
		return q, "A report covers at most " + strconv.Itoa(maxReportDays) + " days: narrow from and to."
	}
	return q, ""
}

func (h *Handler) report(c *fiber.Ctx) error {
	s, q, err := h.reportQuery(c)
	if s == nil {
		return err
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	r, err := h.Store.Report(ctx, s.ID, q)
	if err != nil {
		return busy(c, err)
	}
	return c.JSON(r)
}

func (h *Handler) reportCSV(c *fiber.Ctx) error {
	s, q, err := h.reportQuery(c)
	if s == nil {
		return err
	}
	rowsOf := c.Query("rows", "periods")
	if rowsOf != "periods" && rowsOf != "operators" {
		return fail(c, fiber.StatusBadRequest, "invalid", "rows must be periods or operators.")
	}
	ctx, cancel := reqCtx(c)
	defer cancel()
	r, err := h.Store.Report(ctx, s.ID, q)
	if err != nil {
		return busy(c, err)
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="spookat-report-`+rowsOf+`-`+q.From.Format(time.DateOnly)+`.csv"`)
	w := csv.NewWriter(c.Response().BodyWriter())
	first := "period"
	rows := append(r.Buckets, r.Total)
	if rowsOf == "operators" {
		first, rows = "operator", r.Operators
	}
	secs := func(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 0, 64) }
	_ = w.Write([]string{first, "conversations", "visitor_messages", "operator_messages", "first_responses", "first_response_median_s",
		"first_response_p90_s", "resolved", "resolution_median_s", "resolution_p90_s", "rated_good", "rated_bad"})
	for _, row := range rows {
		_ = w.Write([]string{csvCell(row.Label), strconv.Itoa(row.Conversations), strconv.Itoa(row.VisitorMessages), strconv.Itoa(row.OperatorMessages),
			strconv.Itoa(row.FirstResponse.Count), secs(row.FirstResponse.Median), secs(row.FirstResponse.P90),
			strconv.Itoa(row.Resolution.Count), secs(row.Resolution.Median), secs(row.Resolution.P90),
			strconv.Itoa(row.RatedGood), strconv.Itoa(row.RatedBad)})
	}
	w.Flush()
	return w.Error()
}

// csvCell keeps a name from being read as a formula by a spreadsheet (=, +, -, @ first).
func csvCell(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') {
		return "'" + s
	}
	return s
}
