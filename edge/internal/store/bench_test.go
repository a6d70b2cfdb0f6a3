package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"spookat/schema"
)

// cpuTime is the process's user+system CPU time: on a shared, noisy machine it says what a
// message costs where wall-clock time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSubmitMessage: 1,000 visitors, each with one message in flight, as the edge sees
// them under load. ns/op is the store's cost per message (run with -cpu 1 for one core).
// "replies" makes every fourth message an operator's reply in the conversation (whose commit
// record carries the visitor's address).
func BenchmarkSubmitMessage(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("syncfull=%v", sync), func(b *testing.B) { benchSubmit(b, Options{SyncFull: sync}, 0) })
	}
	b.Run("replies", func(b *testing.B) { benchSubmit(b, Options{}, 4) })
	// The search index's cost on the visitor's path: the same run without it (A/B).
	b.Run("nosearch", func(b *testing.B) { benchSubmit(b, Options{noSearch: true}, 0) })
	// A longer WAL between the writer's own checkpoints, and so rarer timer checkpoints (at
	// each half of it): the checkpoint's cost against the WAL's length (bench/path.md).
	for _, pages := range []int{8192, 16384, 32768} {
		b.Run(fmt.Sprintf("walpages=%d", pages), func(b *testing.B) { benchSubmit(b, Options{WALPages: pages}, 0) })
	}
}

func benchSubmit(b *testing.B, opts Options, replyEvery int) {
	s, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	site := &Site{Name: "bench", Origins: []string{"*"}}
	if err := s.Write(context.Background(), func(tx *Tx) error { return tx.AddSite(site) }); err != nil {
		b.Fatal(err)
	}
	const visitors = 1000
	type visitor struct{ vid, cid int64 }
	vs := make([]visitor, visitors)
	for i := range vs { // conversations exist already, as in steady state
		ch := make(chan MessageResult, 1)
		req := &MessageRequest{SiteID: site.ID, TokenHash: fmt.Appendf(nil, "tok-%04d", i), Author: "visitor", Text: "hi", ClientID: "0",
			Done: func(r MessageResult) { ch <- r }}
		if err := s.SubmitMessage(req); err != nil {
			b.Fatal(err)
		}
		r := <-ch
		vs[i] = visitor{r.VisitorID, r.ConversationID}
	}
	text := "Hello, I have a question about my order #12345, can you help me?"
	var next sync.WaitGroup
	work := make(chan int, visitors)
	b.ReportAllocs()
	frames0 := s.WALStats().Frames
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range visitors {
		next.Add(1)
		go func() {
			defer next.Done()
			done := make(chan MessageResult, 1)
			v := vs[i]
			for n := range work {
				req := &MessageRequest{SiteID: site.ID, VisitorID: v.vid, ConversationID: v.cid, Author: "visitor",
					Text: text, ClientID: fmt.Sprintf("%d-%d", i, n), Done: func(r MessageResult) { done <- r }}
				if replyEvery > 0 && n%replyEvery == 0 {
					req.Author, req.Name, req.VisitorID = "operator", "Rui", 0
				}
				for s.SubmitMessage(req) == ErrBusy {
				}
				if r := <-done; r.Err != nil {
					b.Error(r.Err)
				}
			}
		}()
	}
	for n := range b.N {
		work <- n
	}
	close(work)
	next.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
	// Pages a message writes to the WAL (each is written again by a checkpoint): the path's
	// I/O, where its CPU figure hides in syscalls.
	b.ReportMetric(float64(s.WALStats().Frames-frames0)/float64(b.N), "wal-pages/msg")
	s.stats.mu.Lock()
	b.ReportMetric(float64(s.stats.BatchSizeSum)/float64(s.stats.Commits), "msgs/commit")
	s.stats.mu.Unlock()
}

// BenchmarkRecordDelivery: workers' results as the edge records them, 512 to a transaction
// (results.Recorder's batch). "first": each the first result of its message (a Slack post
// that went through at once: the common case); "again": a second result of each (a retry's
// end: delivered at the second attempt); "rows": first results by RecordDeliveries, as the
// recorder writes them; "rows-scattered": the same in the order a backlog brings them (the
// messages of each 5,000 in random order: partitions and merged posts finishing apart).
// cpu-µs/result is the store's cost of one.
func BenchmarkRecordDelivery(b *testing.B) {
	for _, c := range []struct {
		name        string
		again, rows bool
		scatter     int
	}{{"first", false, false, 0}, {"again", true, false, 0}, {"rows", false, true, 0}, {"rows-scattered", false, true, 5000}} {
		b.Run(c.name, func(b *testing.B) { benchRecord(b, c.again, c.rows, c.scatter) })
	}
}

func benchRecord(b *testing.B, again, rows bool, scatter int) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const batch = 512
	rs, thread, out := make([]*schema.Result, 0, batch), make([]bool, batch), make([]Recorded, batch)
	ids := make([]int64, b.N)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	if scatter > 0 {
		rnd := rand.New(rand.NewPCG(1, 2))
		for lo := 0; lo < len(ids); lo += scatter {
			part := ids[lo:min(lo+scatter, len(ids))]
			rnd.Shuffle(len(part), func(i, j int) { part[i], part[j] = part[j], part[i] })
		}
	}
	record := func(status schema.DeliveryStatus, attempts int) {
		for first := 0; first < b.N; first += batch {
			err := s.Write(context.Background(), func(tx *Tx) error {
				rs = rs[:0]
				for id := first; id < min(first+batch, b.N); id++ {
					r := schema.Result{JobID: "j", Target: schema.TargetSlack, MessageID: ids[id], ConversationID: int64(id%1000 + 1),
						Status: status, Attempts: attempts, ExternalID: "1700000000.000100", ThreadID: "1700000000.000001"}
					if rows {
						rs = append(rs, &r)
						continue
					}
					if _, _, err := tx.RecordDelivery(&r, false); err != nil {
						return err
					}
				}
				if rows {
					return tx.RecordDeliveries(rs, thread[:len(rs)], out[:len(rs)])
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	attempts := 1
	if again {
		record(schema.StatusRetrying, 1)
		attempts = 2
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	record(schema.StatusDelivered, attempts)
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/result")
}

// BenchmarkWriteAlone: a Write alone in its commit, as at low rates (a publish window's end,
// a batch of results, an operator's action): one small INSERT, its transaction and the WAL
// write. cpu-µs/op is the store's cost of one.
func BenchmarkWriteAlone(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Write(ctx, func(tx *Tx) error { return tx.SaveOutboxCut(int64(i + 1)) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
