package store

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"
)

// walStats count the writer's own checkpoints, for /metrics.
type walStats struct {
	copying atomic.Bool  // the timer's checkpoint is running
	passes  atomic.Int64 // the timer's passes that ended
	busy    atomic.Int64 // nanoseconds the timer's passes took, in total
	// writerTurn is set when the writer, at WALPages, asked for a pass before its own: the
	// number that pass will have once ended, << 32, | the millisecond it asked, modulo 2³² (0:
	// no ask under way). After that pass the timer starts none (for a second at most) until the
	// writer has copied: one more would hold the checkpoint lock the writer needs, and the WAL
	// would grow meanwhile.
	writerTurn  atomic.Int64
	timerPass   atomic.Int64 // the WAL's frames << 32 | those copied, at the end of the timer's last pass
	frames      atomic.Int64 // appended to the WAL by commits, over all its restarts
	checkpoints atomic.Int64 // that copied the whole WAL (the next commit restarts it)
	partial     atomic.Int64 // that could not: a reader's snapshot or the timer's checkpoint was in the way
	stalled     atomic.Int64 // nanoseconds the writer spent in them, in total
}

// WALStats is what the writer's checkpoints did since Open.
type WALStats struct {
	Frames      int64         // pages commits appended to the WAL
	Checkpoints int64         // whole: the WAL started again from its beginning after them
	Partial     int64         // not whole (a long read transaction, e.g. a backup or Litestream's)
	Stalled     time.Duration // the writer's time in them, commits waiting meanwhile
	TimerPasses int64         // the timer's checkpoint passes (its own connection; commits go on)
	TimerBusy   time.Duration // their time, in total
}

// WALStats reports the writer's checkpoints.
func (s *Store) WALStats() WALStats {
	return WALStats{Frames: s.wal.frames.Load(), Checkpoints: s.wal.checkpoints.Load(), Partial: s.wal.partial.Load(), Stalled: time.Duration(s.wal.stalled.Load()),
		TimerPasses: s.wal.passes.Load(), TimerBusy: time.Duration(s.wal.busy.Load())}
}

// WALBytes is the WAL file's size now (0 when there is none).
func (s *Store) WALBytes() int64 {
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// walHook runs in the writer goroutine inside each commit, with the WAL's frames after it.
// Each time the WAL grows by half of WALPages it wakes the timer's checkpoint, so that the
// writer, at WALPages, finds most of the WAL copied already. Not more often: each pass copies
// once every page commits rewrote since the last one (a busy conversation's row, an index
// leaf, a table's last leaf), so fewer passes copy less. At each quarter the passes cost 2 %
// more CPU a message side by side, for no shorter tail in a 5-minute soak; with the timer's
// second alone until WALPages, 2 % less again, but the soak's p99 and worst ack got longer
// (bench/path.md, nineteenth session).
func (s *Store) walHook(pages int) {
	if pages >= s.walPages {
		s.wal.frames.Add(int64(pages - s.walPages))
	} else { // the commit started the WAL again
		s.wal.frames.Add(int64(pages))
		s.walKicked = 0
		s.walAsked = time.Time{}
		s.wal.writerTurn.Store(0)
	}
	s.walPages = pages
	// Not while the writer waits to copy itself: a pass started now would hold the checkpoint
	// lock it needs (walCheckpoint).
	if h := s.opts.WALPages / 2; h > 0 && pages >= s.walKicked+h && s.walAsked.IsZero() {
		s.walKicked = pages
		select {
		case s.ckptKick <- struct{}{}:
		default:
		}
	}
}

// walCheckpoint runs in the writer goroutine between two commits. SQLite starts the WAL again
// from its first frame only when a write begins while every frame is already copied into the
// database; the timer's checkpoint copies from another connection while commits go on, so it
// is always behind and the WAL grows as long as writes do. Once the WAL passes WALPages the
// writer copies what is left itself (the timer's pass did most of it) while no commit can add
// frames, and the next commit restarts the WAL. PASSIVE never waits: while the timer's
// checkpoint runs it is tried after the next commit; when a reader's snapshot keeps old
// frames, after a later commit once the WAL grew by another quarter of WALPages or 100 ms
// passed.
func (s *Store) walCheckpoint() {
	limit := s.opts.WALPages
	if limit < 0 || s.walPages < limit {
		return
	}
	if s.wal.copying.Load() {
		return // it holds the checkpoint lock: try after the next commit, with less left to copy
	}
	now := time.Now()
	// Every commit waits while the writer copies, and its fdatasyncs wait for every page
	// copied: when the timer's last pass left more than a sixteenth of WALPages, the timer
	// (whose writes are cut up, writeback.go) copies it first and the writer finishes what
	// arrived meanwhile. Asked once per WAL; after 100 ms without that pass, the writer goes on.
	if s.walAsked.IsZero() {
		if s.walPages-s.timerCopied() > limit/16 {
			s.walAsked, s.walAskedPass = now, s.wal.passes.Load()
			s.wal.writerTurn.Store((s.walAskedPass+1)<<32 | now.UnixMilli()&(1<<32-1))
			select {
			case s.ckptKick <- struct{}{}:
			default:
			}
			return
		}
	} else if s.wal.passes.Load() == s.walAskedPass && now.Sub(s.walAsked) < 100*time.Millisecond {
		return // the pass asked for has not ended
	}
	if !s.walTried.IsZero() && s.walPages < s.walTriedAt+limit/4 && now.Sub(s.walTried) < 100*time.Millisecond {
		return
	}
	s.walTried, s.walTriedAt = now, s.walPages
	nLog, nCkpt, err := s.w.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
	s.wal.stalled.Add(int64(time.Since(now)))
	s.wal.writerTurn.Store(0)
	if err == nil && nLog >= 0 && nCkpt == nLog {
		s.wal.checkpoints.Add(1)
		s.walTried = time.Time{}
		return
	}
	s.wal.partial.Add(1)
}

// timerCopied is how many of the WAL's frames the timer's last pass left copied (0 when that
// pass was over the WAL before it started again: it saw more frames than there are now).
func (s *Store) timerCopied() int {
	p := s.wal.timerPass.Load()
	if log := int(p >> 32); log > s.walPages {
		return 0
	}
	return int(p & (1<<32 - 1))
}

// timerStandsAside says whether the timer's checkpoint should skip a pass now: the pass the
// writer asked for has ended, less than a second ago, and the writer has not copied yet.
func (w *walStats) timerStandsAside(now time.Time) bool {
	t := w.writerTurn.Load()
	if t == 0 {
		return false
	}
	since := (now.UnixMilli() - t) & (1<<32 - 1) // milliseconds since the ask, modulo 2³²
	return w.passes.Load() >= t>>32 && since < 1000
}
