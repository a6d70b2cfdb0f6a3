package store

import (
	"context"
	"math"
	"slices"
	"time"

	"spookat/schema"
)

// Reports for a site's owners, computed from what the edge stores already (no write on the
// visitor's path): conversations started, messages, first response and resolution times,
// ratings, busiest hours; per day or week in the site's time zone, and per operator.

// ReportQuery is a report's span and shape.
type ReportQuery struct {
	From, To time.Time      // [From, To): conversations started and messages written in it
	Loc      *time.Location // the site's time zone: days, weeks and hours are its
	Weekly   bool           // buckets of weeks starting on Monday, else of days
}

// Durations summarises times in ms: how many, their median and 90th percentile.
type Durations struct {
	Count  int   `json:"count"`
	Median int64 `json:"median_ms"`
	P90    int64 `json:"p90_ms"`
}

func summarize(ms []int64) Durations {
	if len(ms) == 0 {
		return Durations{}
	}
	slices.Sort(ms)
	at := func(q float64) int64 { // nearest rank: the smallest value with at least q of them at or below it
		return ms[max(0, int(math.Ceil(q*float64(len(ms))))-1)]
	}
	return Durations{Count: len(ms), Median: at(0.5), P90: at(0.9)}
}

// ReportRow is one day or week, or the whole span, or one operator.
type ReportRow struct {
	Label            string    `json:"label"`           // 2026-12-01 (a day or a week's Monday), "total", or the operator's name
	Start            int64     `json:"start,omitempty"` // Unix ms of the bucket's start
	Conversations    int       `json:"conversations"`   // started (by operator: those they first answered)
	VisitorMessages  int       `json:"visitor_messages"`
	OperatorMessages int       `json:"operator_messages"` // replies (internal notes not counted)
	FirstResponse    Durations `json:"first_response"`    // the visitor's first message to the first reply
	Resolution       Durations `json:"resolution"`        // the conversation's start to its first close
	RatedGood        int       `json:"rated_good"`
	RatedBad         int       `json:"rated_bad"`

	first, resolved []int64
}

// Report is a site's report over a span.
type Report struct {
	From      int64       `json:"from"`
	To        int64       `json:"to"`
	TimeZone  string      `json:"time_zone"`
	By        string      `json:"by"` // day or week
	Buckets   []ReportRow `json:"buckets"`
	Total     ReportRow   `json:"total"`
	Operators []ReportRow `json:"operators"` // by replies, most first
	// Hours counts visitors' messages by weekday (0 Monday) and hour, in the site's zone.
	Hours [7][24]int `json:"hours"`
}

// Report computes a site's report. Conversations started in the span give the times and
// ratings (their whole life, a reply after To included); messages written in it give the
// counts, whatever conversation they are in.
func (s *Store) Report(ctx context.Context, siteID int64, q ReportQuery) (*Report, error) {
	loc := q.Loc
	if loc == nil {
		loc = time.UTC
	}
	from, to := q.From.UnixMilli(), q.To.UnixMilli()
	r := &Report{From: from, To: to, TimeZone: loc.String(), By: "day", Buckets: []ReportRow{}, Operators: []ReportRow{}}
	if q.Weekly {
		r.By = "week"
	}
	// Buckets: local midnights (Mondays for weeks) from the one holding From.
	start := func(t time.Time) time.Time {
		t = t.In(loc)
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		if q.Weekly {
			d = d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
		}
		return d
	}
	for d := start(q.From); d.Before(q.To); {
		r.Buckets = append(r.Buckets, ReportRow{Label: d.Format(time.DateOnly), Start: d.UnixMilli()})
		if q.Weekly {
			d = d.AddDate(0, 0, 7)
		} else {
			d = d.AddDate(0, 0, 1)
		}
	}
	bucket := func(ms int64) *ReportRow {
		i, _ := slices.BinarySearchFunc(r.Buckets, ms, func(b ReportRow, t int64) int {
			switch {
			case b.Start > t:
				return 1
			case b.Start < t:
				return -1
			}
			return 0
		})
		if i < len(r.Buckets) && r.Buckets[i].Start == ms {
			return &r.Buckets[i]
		}
		if i == 0 {
			return nil
		}
		return &r.Buckets[i-1]
	}
	ops := map[string]*ReportRow{}
	op := func(name string) *ReportRow {
		if name == "" {
			name = "(no name)"
		}
		o := ops[name]
		if o == nil {
			o = &ReportRow{Label: name}
			ops[name] = o
		}
		return o
	}
	// A conversation's facts, gathered whatever order its messages come in (an ORDER BY here
	// made SQLite sort each conversation's messages: the index that would give them in
	// order would cost every message's commit).
	type reply struct {
		at   int64
		name string
	}
	type conv struct {
		created      int64
		inSpan       bool
		rating       string
		firstVisitor int64
		replies      []reply // operators' replies, to find the first after the visitor's first message
		resolved     int64
		closer       string
	}
	convs := map[int64]*conv{}
	flush := func(c *conv) {
		if !c.inSpan {
			return
		}
		var first *reply
		for i := range c.replies {
			if rp := &c.replies[i]; c.firstVisitor > 0 && rp.at >= c.firstVisitor && (first == nil || rp.at < first.at) {
				first = rp
			}
		}
		for _, row := range []*ReportRow{bucket(c.created), &r.Total} {
			if row == nil {
				continue
			}
			row.Conversations++
			if first != nil {
				row.first = append(row.first, first.at-c.firstVisitor)
			}
			if c.resolved > 0 {
				row.resolved = append(row.resolved, c.resolved-c.created)
			}
			switch c.rating {
			case "good":
				row.RatedGood++
			case "bad":
				row.RatedBad++
			}
		}
		if first != nil {
			o := op(first.name)
			o.Conversations++
			o.first = append(o.first, first.at-c.firstVisitor)
		}
		if c.resolved > 0 {
			o := op(c.closer)
			o.resolved = append(o.resolved, c.resolved-c.created)
			switch c.rating {
			case "good":
				o.RatedGood++
			case "bad":
				o.RatedBad++
			}
		}
	}
	err := s.Read(ctx, func(rq Querier) error {
		// The site's conversations alive in the span (started before its end, active after
		// its start), with their messages.
		st, err := rq.Stmt(`SELECT c.id, c.created_at, c.rating, m.author, m.kind, m.internal, m.name, m.created_at
			FROM conversations c JOIN messages m ON m.conversation_id = c.id
			WHERE c.site_id = ?1 AND c.created_at < ?3 AND c.updated_at >= ?2`)
		if err != nil {
			return err
		}
		var cur *conv
		var curID int64
		return eachRow(st, []any{siteID, from, to}, func() error {
			if id := st.ColumnInt64(0); cur == nil || id != curID {
				if cur = convs[id]; cur == nil {
					created := st.ColumnInt64(1)
					cur = &conv{created: created, inSpan: created >= from, rating: st.ColumnText(2)}
					convs[id] = cur
				}
				curID = id
			}
			// Raw bytes where a comparison is all that is needed: a report reads every
			// message of a busy site's month.
			author, kind, at := st.ColumnRawText(3), st.ColumnRawText(4), st.ColumnInt64(7)
			counted := at >= from && at < to
			switch {
			case string(kind) == string(schema.KindClosed):
				if cur.resolved == 0 || at < cur.resolved {
					cur.resolved, cur.closer = at, st.ColumnText(6)
				}
			case len(kind) != 0:
			case string(author) == string(schema.AuthorVisitor):
				if cur.firstVisitor == 0 || at < cur.firstVisitor {
					cur.firstVisitor = at
				}
				if counted {
					if b := bucket(at); b != nil {
						b.VisitorMessages++
					}
					r.Total.VisitorMessages++
					t := time.UnixMilli(at).In(loc)
					r.Hours[(int(t.Weekday())+6)%7][t.Hour()]++
				}
			case string(author) == string(schema.AuthorOperator) && !st.ColumnBool(5):
				name := st.ColumnText(6)
				if cur.inSpan {
					cur.replies = append(cur.replies, reply{at, name})
				}
				if counted {
					if b := bucket(at); b != nil {
						b.OperatorMessages++
					}
					r.Total.OperatorMessages++
					op(name).OperatorMessages++
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for _, c := range convs {
		flush(c)
	}
	finish := func(row *ReportRow) {
		row.FirstResponse, row.Resolution = summarize(row.first), summarize(row.resolved)
		row.first, row.resolved = nil, nil
	}
	for i := range r.Buckets {
		finish(&r.Buckets[i])
	}
	finish(&r.Total)
	r.Total.Label = "total"
	for _, o := range ops {
		finish(o)
		r.Operators = append(r.Operators, *o)
	}
	slices.SortFunc(r.Operators, func(a, b ReportRow) int {
		if a.OperatorMessages != b.OperatorMessages {
			return b.OperatorMessages - a.OperatorMessages
		}
		if a.Label < b.Label {
			return -1
		}
		return 1
	})
	return r, nil
}
