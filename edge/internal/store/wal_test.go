package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// Under writes that never pause, the WAL stays near WALPages: the writer finishes the
// timer's checkpoint between two commits and the next commit restarts the WAL. Without it
// (WALPages < 0, as before) the same writes grow the WAL past every bound, which is what
// the test's second case shows it would measure.
func TestWALStaysBoundedUnderSteadyWrites(t *testing.T) {
	const pages = 256 // 1 MiB
	for _, c := range []struct {
		name    string
		pages   int
		bounded bool
	}{
		{"writer checkpoints", pages, true},
		{"timer only", -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{WALPages: c.pages, CheckpointEvery: 20 * time.Millisecond})
			testkit.NoErr(t, err)
			defer s.Close()
			site := &Site{Name: "wal", Origins: []string{"*"}}
			testkit.NoErr(t, s.Write(context.Background(), func(tx *Tx) error { return tx.AddSite(site) }))
			// 64 visitors write as fast as the writer commits, for 24 times WALPages of frames.
			var peak atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			text := fmt.Sprintf("%0200d", 7)
			for v := range 64 {
				wg.Go(func() {
					done := make(chan MessageResult, 1)
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						req := &MessageRequest{SiteID: site.ID, TokenHash: fmt.Appendf(nil, "wal-%02d", v), Author: "visitor",
							Text: text, ClientID: fmt.Sprint(n), Done: func(r MessageResult) { done <- r }}
						for s.SubmitMessage(req) == ErrBusy {
						}
						if r := <-done; r.Err != nil {
							t.Error(r.Err)
							return
						}
					}
				})
			}
			written := func() int64 { // frames appended so far, restarts or not
				return s.WALStats().Frames
			}
			deadline := time.Now().Add(60 * time.Second)
			for written() < 24*pages && time.Now().Before(deadline) {
				peak.Store(max(peak.Load(), s.WALBytes()))
				time.Sleep(2 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			peak.Store(max(peak.Load(), s.WALBytes()))
			st := s.WALStats()
			t.Logf("%d frames written; WAL peak %.1f MiB; writer checkpoints: %d whole, %d partial, %s stalled",
				written(), float64(peak.Load())/(1<<20), st.Checkpoints, st.Partial, st.Stalled.Round(time.Millisecond))
			// WALPages, the frames of the commits around it, and those of the commits that went
			// by while the timer's pass (every 20 ms here) held the checkpoint lock: on a busy
			// machine (a clean CI run with every package's tests at once) that was 5.5 and 9.2
			// MiB. The bound is what tells a WAL that restarts from one that only grows: half
			// of what was written (12 MiB). Without the writer's checkpoints the WAL is all of
			// it, 24 MiB.
			limit := written() * 4096 / 2
			if c.bounded && (peak.Load() > limit || st.Checkpoints == 0) {
				t.Fatalf("WAL peaked at %d bytes (bound %d) with %d whole writer checkpoints", peak.Load(), limit, st.Checkpoints)
			}
			if !c.bounded && peak.Load() <= limit {
				t.Fatalf("without the writer's checkpoints the WAL stayed at %d bytes: this test would not see a WAL that grows", peak.Load())
			}
		})
	}
}
