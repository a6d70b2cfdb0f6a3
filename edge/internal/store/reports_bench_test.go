package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"spookat/schema"
)

// The report's seeded file: one busy site's last 30 days (500 conversations a day of 10
// messages, two in three closed, one in five rated: 150,000 messages) beside a quieter site,
// kept under the system's temporary folder while reportSeedVersion holds.
const (
	reportSeedVersion = "spookat-report-bench-v1"
	reportConvsPerDay = 500
	reportMsgsPerConv = 10
)

func seededReportStore(b *testing.B) (*Store, int64) {
	s := seededStore(b, reportSeedVersion, seedReport)
	var site int64
	if err := s.Read(context.Background(), func(q Querier) error {
		st, err := q.Stmt(`SELECT min(id) FROM sites`)
		if err != nil {
			return err
		}
		_, err = queryRow(st, nil, &site)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return s, site
}

func seedReport(s *Store) error {
	ctx := context.Background()
	busy, quiet := &Site{Name: "busy", Origins: []string{"*"}}, &Site{Name: "quiet", Origins: []string{"*"}}
	if err := s.Write(ctx, func(tx *Tx) error {
		if err := tx.AddSite(busy); err != nil {
			return err
		}
		return tx.AddSite(quiet)
	}); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	for day := range 30 {
		if err := s.Write(ctx, func(tx *Tx) error {
			for i := range reportConvsPerDay {
				site := busy.ID
				if i%10 == 9 {
					site = quiet.ID
				}
				at := start + int64(day)*86_400_000 + r.Int64N(86_400_000)
				var vid, cid int64
				if _, err := tx.QueryRow(`INSERT INTO visitors (site_id, token_hash, created_at) VALUES (?, ?, ?) RETURNING id`,
					[]any{site, fmt.Appendf(nil, "r-%d-%d", day, i), at}, &vid); err != nil {
					return err
				}
				rating := []string{"", "", "", "", "good", "", "", "", "", "bad"}[r.IntN(10)]
				if _, err := tx.QueryRow(`INSERT INTO conversations (site_id, visitor_id, status, rating, created_at, updated_at) VALUES (?, ?, 'open', ?, ?, ?) RETURNING id`,
					[]any{site, vid, rating, at, at}, &cid); err != nil {
					return err
				}
				t := at
				for k := range reportMsgsPerConv {
					author, name, kind := "visitor", "", ""
					switch {
					case k == reportMsgsPerConv-1 && r.IntN(3) < 2:
						author, name, kind = "system", []string{"Ann", "Bob", "Cy"}[r.IntN(3)], string(schema.KindClosed)
					case k%2 == 1:
						author, name = "operator", []string{"Ann", "Bob", "Cy"}[r.IntN(3)]
					}
					t += r.Int64N(600_000)
					if err := tx.exec(`INSERT INTO messages (conversation_id, author, name, text, source, client_id, created_at, kind) VALUES (?, ?, ?, 'words of a message', 'widget', ?, ?, ?)`,
						cid, author, name, fmt.Sprint(k), t, kind); err != nil {
						return err
					}
				}
				if err := tx.exec(`UPDATE conversations SET updated_at = ? WHERE id = ?`, t, cid); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkReport: the busy site's 30 days, by day and by week (p50 and p99 in ms).
func BenchmarkReport(b *testing.B) {
	s, site := seededReportStore(b)
	defer s.Close()
	to := time.Now().Add(24 * time.Hour)
	for _, weekly := range []bool{false, true} {
		b.Run(fmt.Sprintf("weekly=%v", weekly), func(b *testing.B) {
			var lat []time.Duration
			var convs int
			for b.Loop() {
				t0 := time.Now()
				r, err := s.Report(context.Background(), site, ReportQuery{From: to.AddDate(0, 0, -31), To: to, Loc: time.UTC, Weekly: weekly})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				convs = r.Total.Conversations
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(convs), "conversations")
		})
	}
}
