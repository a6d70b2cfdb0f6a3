package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/vfs"
)

// The search index (messages_fts) lives in a file of its own, search.db beside the database,
// written by the indexer: a connection and a goroutine of its own. FTS5 merges an index's
// segments inside the transaction that writes the last of them, and a merge step that reaches
// a common word writes that word's whole list of messages; in the database that held the
// commit every visitor's ack waits for, for up to 150 ms once the index had grown (bench/
// path.md, tenth session). Here the merges hold only the indexer.
//
// The indexer follows the messages in passes (FTS5 writes a segment at the end of every
// transaction that touched the index, so one pass over a thousand messages costs a third of
// what a few dozen a commit did: bench/issue34.md): on a half-second tick, or sooner when the
// writer has committed indexBatch messages it has not seen. Each pass reads one snapshot of
// the database (what retention and erasures deleted since: the search_forget rows; and the
// new messages, which most passes take from the writer's feed in memory instead: feed) and
// writes the index and its watermarks in one transaction of search.db, so a crash leaves
// nothing half indexed. search.db is derived: it is built again from the messages when it is
// missing or does not belong to the database.

// SearchFileName is the search index's file in the data directory.
const SearchFileName = "search.db"

const (
	// indexBatch is how many new messages make the writer wake the indexer before its tick.
	indexBatch = 2000
	indexEvery = 500 * time.Millisecond
	// indexChunk bounds the rows a pass reads: a catch-up over a whole database goes in steps.
	// (Options.searchChunk replaces it in tests.)
	indexChunk = 5000
	// searchVersion is search.db's schema (its PRAGMA user_version); another one is rebuilt.
	searchVersion = 3
)

// searchSchema makes search.db. The index is contentless: the text stays in the database,
// and a message is forgotten by giving its indexed values again ('delete'), which with
// secure-delete takes its words out of the index's pages at once (an erasure must not leave
// them behind until a merge). One column holds the site's term (siteTerm) and the text, so
// that a query matches one site's rows inside the index; detail=none and no per-row sizes
// keep it small (it holds which messages have a word, not where: the edge checks the site
// and a phrase's order on the rows and orders by recency, not rank; against two columns with
// detail=column, half the bytes and 17 % less CPU a message, bench/path.md); automerge 12
// merges less often than the default 4 (bench/issue34.md).
const searchSchema = `
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, content = '',
    tokenize = 'unicode61 remove_diacritics 2',
    columnsize = 0, detail = none
);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 12);
INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
-- token: the database's search_file token; through: the newest message id the passes have
-- read; forgot: the newest search_forget row applied.
CREATE TABLE search_index (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    token   TEXT    NOT NULL,
    through INTEGER NOT NULL,
    forgot  INTEGER NOT NULL
);
`

// The edge runs on one P (GOMAXPROCS follows its one CPU), and Go lets a goroutine that does
// not block run 10 ms before it preempts it, without looking at the network meanwhile: an
// indexer's pass (thousands of messages tokenized, then FTS5 writing and merging segments, up
// to 150 ms) held every ack and socket read for that long. So the indexer naps for a moment
// once it has run yieldEvery without blocking, which sends the scheduler through the
// runnable goroutines and the network poll, at the points it passes often: between rows,
// and in every read and write of search.db's files (the spookat-index VFS, with a page cache of
// 64 pages so that FTS5's flushes and merges read and spill through it), and its syncs leave
// the P to the others.
const (
	indexVFSName = "spookat-index"
	yieldEvery   = 250 * time.Microsecond
	yieldNap     = 20 * time.Microsecond
	// yieldIdleNap is how long a timer's nap must last to have waited on the timer's
	// millisecond; yieldBusyNap how long a nap off the P must last to have let others run.
	yieldIdleNap = 500 * time.Microsecond
	yieldBusyNap = 100 * time.Microsecond
)

func init() {
	registerWrapper(indexVFSName, func(f vfs.File, flags vfs.OpenFlag) vfs.File {
		if flags&(vfs.OPEN_MAIN_DB|vfs.OPEN_WAL) == 0 {
			return f
		}
		return &yieldFile{offPFile{File: f, offPSync: offPSync{fd: fileFd(f)}}}
	})
}

// lastYield is when an indexer last yielded (ns since yieldEpoch); shared by the stores of a
// process, which only makes a test's several indexers yield a little more often. napsOffP:
// the last nap found the process idle (yieldNow); commitCount counts the writers' commits,
// napCommits is what it was after the last nap; catchingUp: the last pass left more to read.
var (
	catchingUp  atomic.Bool
	yieldEpoch  = time.Now()
	lastYield   atomic.Int64
	napsOffP    atomic.Bool
	commitCount atomic.Uint64
	napCommits  atomic.Uint64
)

// yieldNow naps when the indexer has run yieldEvery since its last nap.
//
// A timer's nap while nothing else wants the core lasts a whole millisecond: Go's network
// poller waits on a timer shorter than that for a millisecond. On an idle box (a rebuild at
// night, an upgrade's) that would leave the indexer a fifth of the core. So while the indexer
// catches up (its last pass left more than a pass takes; in step with the messages it naps on
// the timer alone, which costs least), a timer's nap that lasted over yieldIdleNap with no
// commit meanwhile (no message came in; a commit running is what makes a nap long under
// load) turns the next naps into naps off the P (napOffP: as short as a look at the network
// when idle, for two thread switches), until one lasts long or a commit comes (the others
// have work, and the timer's naps are cheaper under load).
func yieldNow() {
	now := int64(time.Since(yieldEpoch))
	if now-lastYield.Load() < int64(yieldEvery) {
		return
	}
	if !catchingUp.Load() {
		time.Sleep(yieldNap)
		lastYield.Store(int64(time.Since(yieldEpoch)))
		return
	}
	commits := commitCount.Load()
	offP := napsOffP.Load() && commits == napCommits.Load() // no commit since the last nap
	if offP {
		napOffP()
	} else {
		time.Sleep(yieldNap)
	}
	end := int64(time.Since(yieldEpoch))
	after := commitCount.Load()
	if slept := end - now; offP {
		napsOffP.Store(slept < int64(yieldBusyNap) && after == commits)
	} else {
		napsOffP.Store(slept > int64(yieldIdleNap) && after == commits)
	}
	napCommits.Store(after)
	lastYield.Store(end)
}

// yieldFile is a file of search.db (the database or its WAL) that yields as it is read and
// written, and syncs without holding the P after its first sync (offPFile).
type yieldFile struct{ offPFile }

func (f *yieldFile) ReadAt(p []byte, off int64) (int, error) {
	yieldNow()
	return f.File.ReadAt(p, off)
}

func (f *yieldFile) WriteAt(p []byte, off int64) (int, error) {
	yieldNow()
	return f.File.WriteAt(p, off)
}

// indexer keeps search.db up to date with the database.
type indexer struct {
	path string
	db   *sqlite3.Conn // search.db: read and written only by run (and open)
	src  *sqlite3.Conn // the database, read-only: only run uses it
	log  *slog.Logger

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	// seen and applied are through and forgot for the writer: it wakes the indexer when
	// indexBatch messages wait and deletes the applied search_forget rows.
	seen, applied atomic.Int64
	// passes, failed, busy (ns) and rebuilds are for /metrics.
	passes, failed, busy, rebuilds atomic.Int64
	// suspected: a search found damage; the next pass checks search.db (checkDamage).
	suspected atomic.Bool
	// gen counts the files search.db has been: a reader attached to an older one (removed
	// by a rebuild while the edge runs) attaches the new one before its next read.
	gen atomic.Int64

	token string // the database's search_file token, as search.db has it
	chunk int    // indexChunk
	// truncateOwed: forgets were applied and search.db's WAL not emptied since (run's).
	truncateOwed bool
	buf          passBuf // run's
	// feed is the writer's committed messages; fed is the rows the last pass took from it,
	// handed back to it emptied by the next.
	feed feed
	fed  []feedRow
	// fedPasses counts the passes that took their rows from the feed (tests).
	fedPasses atomic.Int64
	// commits counts the writer's commits. idleAt is 1 + commits as a pass that found
	// nothing to read saw it (0 when the last pass did not): until another commit, a tick has
	// nothing to read. ticks counts the ticks, passes or not (tests).
	commits, idleAt atomic.Uint64
	ticks           atomic.Int64
	every           time.Duration // indexEvery (Options.searchEvery in tests)

	mu      sync.Mutex
	through int64         // committed in search.db
	forgot  int64         // committed in search.db
	passed  chan struct{} // closed and replaced after every pass
	npass   int64         // passes made
	err     error         // the last pass's, nil once one succeeds
}

// openIndexer opens search.db in dir for the store's database (its ids loaded).
func (s *Store) openIndexer(dir string) (*indexer, error) {
	var maxForget int64
	var token string
	if _, err := queryConn(s.w, `SELECT (SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'search_forget'), (SELECT token FROM search_file)`,
		nil, &maxForget, &token); err != nil {
		return nil, err
	}
	x, err := openIndexer(dir, s.path, token, s.newestMessage(), maxForget, s.opts.Logger)
	if x != nil && s.opts.searchChunk > 0 {
		x.chunk = s.opts.searchChunk
	}
	if x != nil && s.opts.searchEvery > 0 {
		x.every = s.opts.searchEvery
	}
	if x != nil {
		x.feed.max = x.chunk
	}
	return x, err
}

// newestMessage is the id of the newest message written (or a little above: ids are handed
// out in blocks, and a restart skips the rest of the block).
func (s *Store) newestMessage() int64 { return s.ids.nextMsg - 1 }

// openIndexer opens search.db in dir for the database at dbPath, whose search_file token is
// token, newest message id at most newest and newest search_forget row maxForget: an index
// of another token, or that claims more, was built for another copy of the database and is
// built again.
func openIndexer(dir, dbPath, token string, newest, maxForget int64, log *slog.Logger) (*indexer, error) {
	x := &indexer{
		path:   filepath.Join(dir, SearchFileName),
		log:    log.With("part", "search index"),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		passed: make(chan struct{}),
		chunk:  indexChunk,
		every:  indexEvery,
	}
	for try := 0; ; try++ {
		err := x.openDB(token)
		if err == nil && x.token != token {
			err = errors.New("it was built for another database (search_file's token)")
		}
		if err == nil && (x.through > newest || x.forgot > maxForget) {
			err = fmt.Errorf("it holds messages through %d and forgot through %d, the database has %d and %d", x.through, x.forgot, newest, maxForget)
		}
		if err == nil {
			break
		}
		if x.db != nil {
			x.db.Close()
			x.db = nil
		}
		if try > 0 {
			return nil, fmt.Errorf("open %s: %w", x.path, err)
		}
		x.log.Warn("building the search index again", "file", x.path, "why", err.Error())
		if err := x.remove(); err != nil {
			return nil, err
		}
	}
	x.seen.Store(x.through)
	x.applied.Store(x.forgot)
	x.feed.base, x.feed.upto = newest, newest
	src, err := openSQLite(dbPath, sqlite3.OPEN_READONLY)
	if err == nil {
		err = src.BusyTimeout(5 * time.Second)
	}
	if err != nil {
		x.db.Close()
		if src != nil {
			src.Close()
		}
		return nil, fmt.Errorf("open the indexer's reader: %w", err)
	}
	x.src = src
	return x, nil
}

// remove deletes search.db and its WAL and shared memory (x.db closed).
func (x *indexer) remove() error {
	for _, p := range []string{x.path, x.path + "-wal", x.path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// damaged reports whether err says a database's pages, or FTS5's records in them, are not
// what they must be: for search.db a rebuild is the cure, as a retry is not.
func damaged(err error) bool {
	return errors.Is(err, sqlite3.CORRUPT) || errors.Is(err, sqlite3.NOTADB)
}

// indexDamaged is a pass's error that is search.db's damage (not spookat.db's, which a pass
// reads too: building search.db again would not cure that).
type indexDamaged struct{ err error }

func (e indexDamaged) Error() string { return e.err.Error() }
func (e indexDamaged) Unwrap() error { return e.err }

// ofIndex marks err as search.db's when it is damage.
func ofIndex(err error) error {
	if damaged(err) {
		return indexDamaged{err}
	}
	return err
}

// rebuild replaces a damaged search.db, while the edge runs, with an empty one that the
// next passes fill from the messages (searches find the older ones as they go). Readers
// attached to the old file attach the new one before their next read (gen).
func (x *indexer) rebuild(why error) error {
	x.log.Warn("building the search index again", "file", x.path, "why", why.Error())
	x.rebuilds.Add(1)
	if x.db != nil {
		x.db.Close()
		x.db = nil
	}
	if err := x.remove(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.openDB(x.token); err != nil {
		return err // x.db is nil: the next pass tries again
	}
	x.seen.Store(x.through)
	x.applied.Store(x.forgot)
	x.truncateOwed = false
	x.gen.Add(1)
	return nil
}

// openDB opens search.db as x.db, making it first if it is not there, and reads its token
// and watermarks. On an error x.db is left nil.
func (x *indexer) openDB(token string) (err error) {
	defer func() {
		if err != nil && x.db != nil {
			x.db.Close()
			x.db = nil
		}
	}()
	if err := makePrivate(filepath.Dir(x.path), x.path); err != nil {
		return err
	}
	uri, err := vfsURI(x.path, indexVFSName)
	if err != nil {
		return err
	}
	if x.db, err = openSQLite(uri, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE); err != nil {
		return err
	}
	if err := setupConn(x.db); err != nil {
		return err
	}
	// secure_delete=ON: a page freed by a merge or a forget is zeroed, so an erased person's
	// words leave no copy in the file's free pages.
	if err := x.db.Exec(`PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;
		PRAGMA secure_delete=ON; PRAGMA journal_size_limit=16777216; PRAGMA cache_size=-256`); err != nil {
		return err
	}
	if err := chmodExisting(0o600, x.path+"-wal", x.path+"-shm"); err != nil {
		return err
	}
	var version int64
	if _, err := queryConn(x.db, `PRAGMA user_version`, nil, &version); err != nil {
		return err
	}
	if version == 0 {
		err := x.db.Exec(`BEGIN IMMEDIATE;` + searchSchema + fmt.Sprintf(`PRAGMA user_version=%d;`, searchVersion))
		if err == nil {
			err = execConn(x.db, `INSERT INTO search_index (id, token, through, forgot) VALUES (1, ?, 0, 0)`, token)
		}
		if err == nil {
			err = x.db.Exec(`COMMIT`)
		}
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
	} else if version != searchVersion {
		return fmt.Errorf("its schema is version %d, this edge's %d", version, searchVersion)
	}
	found, err := queryConn(x.db, `SELECT token, through, forgot FROM search_index WHERE id = 1`, nil, &x.token, &x.through, &x.forgot)
	if err == nil && !found {
		err = errors.New("no watermark row")
	}
	return err
}

func (x *indexer) close() error {
	var errs []error
	if x.src != nil {
		errs = append(errs, x.src.Close())
	}
	if x.db != nil {
		errs = append(errs, x.db.Close())
	}
	return errors.Join(errs...)
}

// run makes passes until stop is closed (Close then closes its connections).
func (x *indexer) run() {
	defer close(x.done)
	t := time.NewTicker(x.every)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
			x.ticks.Add(1)
			if !x.due() {
				continue
			}
		case <-x.kick:
		}
		for {
			t0 := time.Now()
			more, err := x.pass()
			catchingUp.Store(more)
			x.busy.Add(int64(time.Since(t0)))
			x.passes.Add(1)
			if err != nil {
				x.failed.Add(1)
				if errors.As(err, new(indexDamaged)) {
					if rerr := x.rebuild(err); rerr != nil {
						err = fmt.Errorf("%w; building it again: %w", err, rerr)
					}
				}
			}
			x.mu.Lock()
			if err != nil && x.err == nil {
				x.log.Error("search index pass failed; retrying on the next tick", "err", err.Error())
			}
			x.err = err
			x.npass++
			close(x.passed)
			x.passed = make(chan struct{})
			x.mu.Unlock()
			if !more || err != nil {
				break
			}
			select {
			case <-x.stop:
				return
			default:
			}
		}
	}
}

// due says whether a tick's pass may find work: not when the last pass found nothing to
// read, no commit came since and nothing else is owed. An idle edge's ticks would otherwise
// open a snapshot and prepare three statements twice a second for nothing (a kick, which a
// commit, a search's suspicion or a waiter sends, always passes).
func (x *indexer) due() bool {
	return x.idleAt.Load() != x.commits.Load()+1 || x.truncateOwed || x.db == nil || x.suspected.Load()
}

// SearchIndexStats is what the indexer did since Open.
type SearchIndexStats struct {
	Passes, Failed int64
	Busy           time.Duration // time in passes
	// Rebuilds counts the times a damaged search.db was replaced while the edge ran.
	Rebuilds int64
	// Behind is how far the newest message id is past what the index has read (ids are
	// handed out in blocks: after a restart it counts the block's unused rest too).
	Behind int64
}

// SearchIndexStats reports the indexer's passes and lag.
func (s *Store) SearchIndexStats() SearchIndexStats {
	x := s.idx
	return SearchIndexStats{Passes: x.passes.Load(), Failed: x.failed.Load(), Busy: time.Duration(x.busy.Load()),
		Rebuilds: x.rebuilds.Load(), Behind: max(0, s.newestCommitted.Load()-x.seen.Load())}
}

// suspect asks the next pass, now, to check search.db for damage a search ran into: a
// pass reads only what it writes and merges, and would not find damage in older segments.
func (x *indexer) suspect() {
	x.suspected.Store(true)
	x.wake()
}

// checkDamage runs SQLite's quick_check of search.db, which runs FTS5's own check of the
// index too (the 'integrity-check' command's; it reads the whole index), and returns what it
// found, or nil.
func (x *indexer) checkDamage() error {
	var verdict string
	if _, err := queryConn(x.db, `PRAGMA quick_check(1)`, nil, &verdict); err != nil {
		return err
	}
	if verdict != "ok" {
		return fmt.Errorf("%w: quick_check: %s", sqlite3.CORRUPT, verdict)
	}
	return nil
}

// wake asks for a pass now (it never blocks).
func (x *indexer) wake() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// waitFor returns once ok holds of the committed watermarks, after as many passes as that
// takes, or the error of a pass begun after the call.
func (x *indexer) waitFor(ctx context.Context, ok func(through, forgot int64) bool) error {
	x.mu.Lock()
	first := x.npass + 1 // the pass under way may have read its snapshot before the call
	x.mu.Unlock()
	for {
		x.mu.Lock()
		done, passed, err, n := ok(x.through, x.forgot), x.passed, x.err, x.npass
		x.mu.Unlock()
		if done {
			return nil
		}
		if err != nil && n > first {
			return fmt.Errorf("search index: %w", err)
		}
		x.wake()
		select {
		case <-passed:
		case <-ctx.Done():
			return ctx.Err()
		case <-x.done:
			return ErrClosed
		}
	}
}

// A pass's rows hold what the index holds of their message (appendIndexed) as a span of the
// pass's text, copied there from SQLite's memory as they are read: once the buffers have
// grown, a pass allocates nothing a row (a string a row, its indexed copy and their boxing
// were a third of the edge's allocations under load; bench/path.md).
type indexRow struct {
	id       int64
	from, to int // passBuf.text[from:to]
}

type forgetRow struct {
	seq, message int64
	from, to     int
}

// passBuf is what a pass read, kept from one pass to the next.
type passBuf struct {
	rows    []indexRow
	forgets []forgetRow
	text    []byte
}

// passKeep bounds the text a pass's buffer keeps for the next: a catch-up over long messages
// grows it further, and then lets it go.
const passKeep = 1 << 20

func (b *passBuf) reset() {
	b.rows, b.forgets = b.rows[:0], b.forgets[:0]
	if cap(b.text) > passKeep {
		b.text = nil
	}
	b.text = b.text[:0]
}

// addRow appends a message to index.
func addRow[T string | []byte](b *passBuf, id, site int64, text T) {
	from, to := addText(b, site, text)
	b.rows = append(b.rows, indexRow{id, from, to})
}

// addForget appends a message to forget.
func (b *passBuf) addForget(seq, message, site int64, text []byte) {
	from, to := addText(b, site, text)
	b.forgets = append(b.forgets, forgetRow{seq, message, from, to})
}

// addText appends what the index holds of a message to the pass's text and says where it is.
func addText[T string | []byte](b *passBuf, site int64, text T) (from, to int) {
	from = len(b.text)
	b.text = appendIndexed(b.text, site, text)
	return from, len(b.text)
}

// pass brings the index up to one snapshot of the database (more: the snapshot has more
// rows than a pass takes).
func (x *indexer) pass() (more bool, err error) {
	commits := x.commits.Load() // before the snapshot: a commit after it makes the next tick due
	x.idleAt.Store(0)
	if x.db == nil {
		if err := x.rebuild(errors.New("the last rebuild did not finish")); err != nil {
			return false, err
		}
	}
	if x.suspected.Swap(false) {
		if err := x.checkDamage(); err != nil {
			return false, fmt.Errorf("a search found damage: %w", ofIndex(err))
		}
		x.log.Info("a search failed on damaged pages, and search.db's checks found none: spookat.db's pages may be the damaged ones (ops/RUNBOOK.md)")
	}
	x.mu.Lock()
	through, forgot := x.through, x.forgot
	x.mu.Unlock()

	b := &x.buf
	b.reset()
	newest, err := x.read(b, through, forgot)
	if err != nil {
		return false, err
	}
	forgets, rows := b.forgets, b.rows
	// A pass that could not take every forget in sight indexes nothing. Then a forget in
	// sight was not in sight of the last pass that indexed rows: its message was deleted
	// after that pass's snapshot, so that pass (or an earlier one) read it if its id is at
	// most through, and no pass did if not (write applies it accordingly).
	forgetsOnly := len(forgets) == x.chunk
	newThrough, newForgot := through, forgot
	if !forgetsOnly {
		switch {
		case len(rows) == x.chunk:
			newThrough, more = rows[len(rows)-1].id, true
		case newest > through:
			newThrough = newest
		}
	} else {
		more = true
	}
	if len(forgets) > 0 {
		newForgot = forgets[len(forgets)-1].seq
	}
	if newThrough == through && newForgot == forgot {
		x.emptyWAL()
		x.idleAt.Store(commits + 1)
		return false, nil
	}
	if err := x.write(b, through, forgetsOnly, newThrough, newForgot); err != nil {
		return false, ofIndex(err)
	}
	// The forgotten words' old pages are in the file or the WAL until a checkpoint copies
	// and empties it. A search under way may keep it from finishing within the busy
	// timeout: the next passes try again.
	x.truncateOwed = x.truncateOwed || len(forgets) > 0
	x.emptyWAL()
	x.mu.Lock()
	x.through, x.forgot = newThrough, newForgot
	x.mu.Unlock()
	x.seen.Store(newThrough)
	x.applied.Store(newForgot)
	return more, nil
}

// emptyWAL copies search.db's WAL into it and empties it when forgets were applied since it
// last did.
func (x *indexer) emptyWAL() {
	if x.truncateOwed {
		_, _, err := x.db.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE)
		x.truncateOwed = err != nil
	}
}

// read takes into b, in one snapshot of the database, the forgets above forgot and the
// indexable messages above through, and returns the newest message id.
func (x *indexer) read(b *passBuf, through, forgot int64) (newest int64, err error) {
	if err := x.src.Exec(`BEGIN`); err != nil {
		return 0, err
	}
	defer func() {
		if e := x.src.Exec(`COMMIT`); err == nil {
			err = e
		}
	}()
	st, _, err := x.src.Prepare(`SELECT seq, message, site, text FROM search_forget WHERE seq > ? ORDER BY seq LIMIT ?`)
	if err != nil {
		return 0, err
	}
	err = eachRow(st, []any{forgot, x.chunk}, func() error {
		yieldNow()
		b.addForget(st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnInt64(2), st.ColumnRawText(3))
		return nil
	})
	st.Close()
	if err != nil {
		return 0, err
	}
	if len(b.forgets) > 0 { // the feed may hold their messages: this pass reads the database
		x.feed.drop()
		if len(b.forgets) == x.chunk {
			return 0, nil
		}
	} else if rows, newest, ok := x.feed.take(through, x.fed); ok {
		for _, r := range rows {
			if r.id > through {
				yieldNow()
				addRow(b, r.id, r.site, r.text)
			}
		}
		x.fed = rows
		x.fedPasses.Add(1)
		return newest, nil
	}
	st, _, err = x.src.Prepare(`SELECT id, site, text FROM message_search WHERE id > ? ORDER BY id LIMIT ?`)
	if err != nil {
		return 0, err
	}
	err = eachRow(st, []any{through, x.chunk}, func() error {
		yieldNow()
		addRow(b, st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnRawText(2))
		return nil
	})
	st.Close()
	if err != nil {
		return 0, err
	}
	_, err = queryConn(x.src, `SELECT coalesce(max(id), 0) FROM messages`, nil, &newest)
	return newest, err
}

// write applies a pass in one transaction of search.db.
func (x *indexer) write(b *passBuf, through int64, forgetsOnly bool, newThrough, newForgot int64) (err error) {
	if err := x.db.Exec(`BEGIN IMMEDIATE`); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = x.db.Exec(`ROLLBACK`)
		}
	}()
	text := string(b.text) // one copy a pass, where binding each span would copy each
	err = x.insertDocs(`INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', ?, ?)`, len(b.forgets), func(i int) (int64, string, bool) {
		// Only what a pass indexed: 'delete' with values the index does not hold for that
		// row would damage it.
		f := b.forgets[i]
		return f.message, text[f.from:f.to], f.message <= through
	})
	if err != nil {
		return err
	}
	if !forgetsOnly {
		err = x.insertDocs(`INSERT INTO messages_fts (rowid, text) VALUES (?, ?)`, len(b.rows), func(i int) (int64, string, bool) {
			r := b.rows[i]
			return r.id, text[r.from:r.to], true
		})
		if err != nil {
			return err
		}
	}
	if err := execConn(x.db, `UPDATE search_index SET through = ?, forgot = ? WHERE id = 1`, newThrough, newForgot); err != nil {
		return err
	}
	return x.db.Exec(`COMMIT`)
}

// insertDocs runs sql, an INSERT of a rowid and a text, for each of n documents that doc
// says to (ok), binding them without boxing them.
func (x *indexer) insertDocs(sql string, n int, doc func(i int) (rowid int64, text string, ok bool)) error {
	return withStmt(x.db, sql, func(st *sqlite3.Stmt) error {
		for i := range n {
			yieldNow()
			rowid, text, ok := doc(i)
			if !ok {
				continue
			}
			if err := errors.Join(st.BindInt64(1, rowid), st.BindText(2, text)); err != nil {
				return err
			}
			if err := st.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
}

// siteTerm is the word the index holds for a site in each of its messages: one token to
// the tokenizer, and not a word people write. A message whose text has it anyway is a
// match to walk past, not a wrong hit: a search's rows are checked against their site.
func siteTerm(site int64) string { return string(appendSiteTerm(nil, site)) }

func appendSiteTerm(dst []byte, site int64) []byte {
	return strconv.AppendInt(append(dst, "0site"...), site, 10)
}

// appendIndexed appends what the index holds of a message (and is given again to forget it):
// the site's term and the text without its stop words.
func appendIndexed[T string | []byte](dst []byte, site int64, text T) []byte {
	dst = append(appendSiteTerm(dst, site), ' ')
	return appendIndexable(dst, text)
}

// withStmt prepares sql on c, hands the statement to fn and finishes it.
func withStmt(c *sqlite3.Conn, sql string, fn func(st *sqlite3.Stmt) error) (err error) {
	st, _, err := c.Prepare(sql)
	if err != nil {
		return err
	}
	defer func() {
		if e := st.Close(); err == nil {
			err = e
		}
	}()
	return fn(st)
}

// execConn prepares sql on c, runs it once with args and finishes it.
func execConn(c *sqlite3.Conn, sql string, args ...any) error {
	return withStmt(c, sql, func(st *sqlite3.Stmt) error { return execStmt(st, args...) })
}

// queryConn prepares sql on c, scans its first row into dest (found: there was one) and
// finishes it.
func queryConn(c *sqlite3.Conn, sql string, args []any, dest ...any) (found bool, err error) {
	err = withStmt(c, sql, func(st *sqlite3.Stmt) (err error) {
		found, err = queryRow(st, args, dest...)
		return err
	})
	return found, err
}

// execStmt runs a statement that returns no rows.
func execStmt(st *sqlite3.Stmt, args ...any) error {
	if err := bind(st, args); err != nil {
		return err
	}
	return st.Exec()
}

// IndexNow brings the search index up to every message committed and forgotten before it
// was called rather than within the second (tests, and whoever needs a search to see a
// message just written).
func (s *Store) IndexNow(ctx context.Context) error {
	if s.opts.noSearch {
		return nil
	}
	var newest, forget int64
	if err := s.Write(ctx, func(tx *Tx) error {
		_, err := tx.QueryRow(`SELECT (SELECT coalesce(max(id), 0) FROM messages), (SELECT coalesce(max(seq), 0) FROM search_forget)`, nil, &newest, &forget)
		return err
	}); err != nil {
		return err
	}
	return s.idx.waitFor(ctx, func(through, forgot int64) bool { return through >= newest && forgot >= forget })
}

// deleteForgotten deletes the search_forget rows through seq, which the indexer has applied.
// They hold deleted messages' text (an erasure's among them, whether the erasure or the
// writer's tick comes first), so they are zeroed: secure_delete ON for this statement, then
// the writer's own FAST again (store.go).
func (tx *Tx) deleteForgotten(seq int64) error {
	if err := tx.exec(`PRAGMA secure_delete = ON`); err != nil {
		return err
	}
	err := tx.exec(`DELETE FROM search_forget WHERE seq <= ?`, seq)
	if e := tx.exec(`PRAGMA secure_delete = FAST`); err == nil {
		err = e
	}
	return err
}

// forgetApplied waits until the indexer has applied the search_forget rows through seq.
func (s *Store) forgetApplied(ctx context.Context, seq int64) error {
	if s.opts.noSearch {
		return nil
	}
	return s.idx.waitFor(ctx, func(_, forgot int64) bool { return forgot >= seq })
}
