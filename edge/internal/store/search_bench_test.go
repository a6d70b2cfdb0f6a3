package store

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// searchWords are the common words of the benchmark's messages, most frequent first; the
// rest of the vocabulary is synthetic (w00001…), drawn on a Zipf curve after them.
var searchWords = strings.Fields(`the i to a my and is it you for of on in have this can with not order
	that be me but do was help please thanks hi hello account when what how get your are there
	from just we at an if so no payment refund shipping delivery invoice password login email card
	price plan subscription cancel upgrade error page app website support question problem issue
	working work time day week today tomorrow yesterday still again received package tracking number
	address change update new old product item size color return exchange damaged broken missing wrong
	late early fast slow charge charged twice discount coupon code free trial billing checkout cart`)

// searchText draws a message of 6 to 25 words.
func searchText(r *rand.Rand, z *rand.Zipf) string {
	n := 6 + r.IntN(20)
	words := make([]string, n)
	for i := range words {
		if k := int(z.Uint64()); k < len(searchWords) {
			words[i] = searchWords[k]
		} else {
			words[i] = fmt.Sprintf("w%05d", k-len(searchWords))
		}
	}
	return strings.Join(words, " ")
}

// The seeded file: 1,000,000 messages over a year in 1,200 sites whose sizes follow a
// power law (the biggest about 60,000 messages, the smallest about 200), 20 messages a
// conversation, a third of the conversations closed, one visitor in four with a name and
// an email. Seeding takes minutes, so the file is kept under the system's temporary folder
// and reused while searchSeedVersion holds.
const (
	searchSeedVersion = "spookat-search-bench-v3"
	searchMessages    = 1_000_000
	searchSites       = 1200
	searchPerConv     = 20
)

// seededStore opens a benchmark's file under the system's temporary folder, seeding it first
// (the writer's index off: seed writes rows its own way) unless a file of this version is there.
func seededStore(b *testing.B, version string, seed func(*Store) error) *Store {
	dir := filepath.Join(os.TempDir(), version)
	marker := filepath.Join(dir, "seeded")
	if _, err := os.Stat(marker); err != nil {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		s, err := Open(dir, Options{noSearch: true})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := seed(s); err != nil {
			b.Fatal(err)
		}
		s.Close()
		b.Logf("seeded %s in %v", version, time.Since(t0).Round(time.Second))
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := s.IndexNow(ctx); err != nil { // a new seed, or a file indexed by an older edge
		b.Fatal(err)
	}
	return s
}

func seededSearchStore(b *testing.B) (s *Store, sites []int64, op int64) {
	s = seededStore(b, searchSeedVersion, seedSearch)
	err := s.Read(context.Background(), func(q Querier) error {
		st, err := q.Stmt(`SELECT id FROM sites ORDER BY id`)
		if err != nil {
			return err
		}
		if err := eachRow(st, nil, func() error { sites = append(sites, st.ColumnInt64(0)); return nil }); err != nil {
			return err
		}
		st, err = q.Stmt(`SELECT min(id) FROM operators`)
		if err != nil {
			return err
		}
		_, err = queryRow(st, nil, &op)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return s, sites, op
}

func seedSearch(s *Store) error {
	ctx := context.Background()
	sites := make([]*Site, searchSites)
	if err := s.Write(ctx, func(tx *Tx) error {
		keys := make([]string, len(sites))
		for i := range sites {
			sites[i] = &Site{Name: fmt.Sprint("site ", i), Origins: []string{"*"}}
			if err := tx.AddSite(sites[i]); err != nil {
				return err
			}
			keys[i] = sites[i].Key
		}
		_, err := tx.AddOperator("bench@example.com", "Bench", "correct horse battery", keys)
		return err
	}); err != nil {
		return err
	}
	// Site i's share of the messages is proportional to (i+1)^-0.8.
	weights := make([]float64, len(sites))
	total := 0.0
	for i := range weights {
		weights[i] = math.Pow(float64(i+1), -0.8)
		total += weights[i]
	}
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.07, 2, uint64(len(searchWords)+50_000))
	const year = 365 * 86_400_000
	start := time.Now().UnixMilli() - year
	type conv struct{ id, site, left int64 }
	var open []conv // conversations still taking messages, in time order of their start
	n := 0
	for n < searchMessages {
		if err := s.Write(ctx, func(tx *Tx) error {
			for range 10_000 {
				if n == searchMessages {
					return nil
				}
				at := start + int64(n)*year/searchMessages
				if len(open) < 400 || r.IntN(searchPerConv) == 0 { // a new conversation on a site drawn by weight
					x, i := r.Float64()*total, 0
					for ; i < len(sites)-1 && x > weights[i]; i++ {
						x -= weights[i]
					}
					name, email := "", ""
					if r.IntN(4) == 0 {
						first := []string{"Ann", "Bob", "Zoë", "Jürgen", "Maria", "Chen", "Olu", "Sam"}[r.IntN(8)]
						name = fmt.Sprintf("%s %c%05d", first, 'A'+r.IntN(26), r.IntN(100_000))
						email = fmt.Sprintf("%s%d@example.com", strings.ToLower(first[:2]), n)
					}
					var vid, cid int64
					if _, err := tx.QueryRow(`INSERT INTO visitors (site_id, token_hash, name, email, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
						[]any{sites[i].ID, fmt.Appendf(nil, "bench-%d", n), name, email, at}, &vid); err != nil {
						return err
					}
					status := []string{"open", "closed", "closed"}[r.IntN(3)]
					if _, err := tx.QueryRow(`INSERT INTO conversations (site_id, visitor_id, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
						[]any{sites[i].ID, vid, status, at, at}, &cid); err != nil {
						return err
					}
					open = append(open, conv{cid, sites[i].ID, int64(2 + r.IntN(2*searchPerConv-2))})
				}
				k := len(open) - 1 - min(len(open)-1, int(r.ExpFloat64()*100)) // recent conversations are the busy ones
				c := &open[k]
				author := []string{"visitor", "visitor", "operator"}[r.IntN(3)]
				if err := tx.exec(`INSERT INTO messages (conversation_id, author, text, source, client_id, created_at) VALUES (?, ?, ?, 'widget', ?, ?)`,
					c.id, author, searchText(r, z), fmt.Sprint(n), at); err != nil {
					return err
				}
				if err := tx.exec(`UPDATE conversations SET last_message_id = ?, updated_at = ? WHERE id = ?`, tx.LastInsertRowID(), at, c.id); err != nil {
					return err
				}
				n++
				if c.left--; c.left == 0 {
					open = slices.Delete(open, k, k+1)
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// The messages went in around the writer's ids: the indexer reads them all on the
	// next open (seededStore waits for it).
	return nil
}

// BenchmarkSearch runs each query shape on the seeded file, on the biggest site, a middling
// one and the smallest, and reports p50 and p99 in ms and the first page's hits.
func BenchmarkSearch(b *testing.B) {
	s, sites, op := seededSearchStore(b)
	defer s.Close()
	now := time.Now().UnixMilli()
	month := int64(30 * 86_400_000)
	for _, site := range []struct {
		name string
		id   int64
	}{{"big", sites[0]}, {"middle", sites[len(sites)/2]}, {"small", sites[len(sites)-1]}} {
		for _, c := range []struct {
			name string
			q    SearchQuery
		}{
			{"rare", SearchQuery{Text: "w04711 "}},
			{"mid", SearchQuery{Text: "w00042 "}},
			{"common", SearchQuery{Text: "order "}},
			{"common-two", SearchQuery{Text: "refund order "}},
			{"phrase", SearchQuery{Text: `"my order" `}},
			{"prefix", SearchQuery{Text: "pay"}},
			{"prefix-wide", SearchQuery{Text: "w00"}},
			{"closed", SearchQuery{Text: "refund ", Status: "closed"}},
			{"snoozed-none", SearchQuery{Text: "order ", Status: "snoozed"}}, // walks the whole window for nothing
			{"unassigned", SearchQuery{Text: "refund ", Unassigned: true}},
			{"last-month", SearchQuery{Text: "refund ", From: now - month}},
			{"a-year-ago", SearchQuery{Text: "w00042 ", To: now - 11*month}},
			{"person", SearchQuery{Text: "maria"}},
			{"nothing", SearchQuery{Text: "xylophone "}},
		} {
			b.Run(site.name+"/"+c.name, func(b *testing.B) {
				ctx := context.Background()
				var lat []time.Duration
				var hits int
				for b.Loop() {
					t0 := time.Now()
					res, err := s.Search(ctx, op, site.id, c.q)
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
					hits = len(res.Hits) + len(res.People)
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(hits), "hits")
			})
		}
	}
}

// BenchmarkSearchIndexPass is the indexer's cost a message: passes of a given size written
// into a growing search.db by the indexer's own code (each text's stop words and site term as
// a pass reads it, then FTS5's tokenizing, its segments and their merges, the transaction),
// the reading of spookat.db left out. Each iteration indexes
// 100,000 messages: "loadgen" is loadgen's text (the same 48 bytes every message), "chat"
// messages of 6 to 25 words drawn on a Zipf curve; the number is the pass's size (the writer
// wakes the indexer every indexBatch messages, and its tick takes what is there). It reports
// CPU µs a message and search.db's bytes a message.
func BenchmarkSearchIndexPass(b *testing.B) {
	for _, shape := range []string{"loadgen", "chat"} {
		for _, size := range []int{indexBatch, indexChunk} {
			b.Run(fmt.Sprint(shape, "-", size), func(b *testing.B) {
				b.ReportAllocs()
				dir := b.TempDir()
				s, err := Open(dir, Options{noSearch: true})
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
				x, err := openIndexer(dir, filepath.Join(dir, FileName), "bench", 0, 0, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				defer x.close()
				r := rand.New(rand.NewPCG(1, 2))
				z := rand.NewZipf(r, 1.1, 2, 50_000)
				type doc struct {
					site int64
					text []byte
				}
				docs := make([]doc, size)
				var buf passBuf
				id := int64(0)
				var cpu time.Duration
				for b.Loop() {
					for range 100_000 / size {
						b.StopTimer()
						for i := range docs {
							docs[i] = doc{1 + r.Int64N(searchSites), []byte("Hi! I have a question about my order, could som")}
							if shape == "chat" {
								docs[i].text = []byte(searchText(r, z))
							}
						}
						c0 := cpuTime()
						b.StartTimer()
						buf.reset()
						for _, d := range docs {
							id++
							addRow(&buf, id, d.site, d.text)
						}
						if err := x.write(&buf, id-int64(size), false, id, 0); err != nil {
							b.Fatal(err)
						}
						cpu += cpuTime() - c0
					}
				}
				var pages int64
				if _, err := queryConn(x.db, `PRAGMA page_count`, nil, &pages); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(cpu.Microseconds())/float64(id), "cpu-µs/msg")
				b.ReportMetric(float64(pages*4096)/float64(id), "B/msg")
			})
		}
	}
}
