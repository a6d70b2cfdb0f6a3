// Package store owns the SQLite file. One goroutine (the writer) owns the only write
// connection and commits whatever is queued in one transaction (group commit); callers are
// answered only after that commit. Reads use a small pool of read-only connections. WAL
// checkpoints run from their own connection on a timer so that the copying does not stall
// commits; but under steady writes such a checkpoint never catches up with the writer, and
// the WAL can only start again from its beginning once it is wholly copied, so once the WAL
// passes WALPages the writer itself finishes the copy between two commits (see walCheckpoint).
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver" // links the SQLite build; no database/sql use
	"github.com/ncruces/go-sqlite3/ext/fts5"
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"

	"spookat/schema"
)

// FileName is the database file inside the data directory.
const FileName = "spookat.db"

// ErrClosed is returned for requests made after Close.
var ErrClosed = errors.New("store: closed")

// ErrBusy is returned when the writer's queue is full: the caller answers "unavailable".
var ErrBusy = errors.New("store: write queue full")

// Options tune the store.
type Options struct {
	// SyncFull sets synchronous=FULL: every commit survives a power cut. The default,
	// synchronous=NORMAL in WAL mode, survives a process crash (SIGKILL included) with nothing
	// lost, but a power cut or kernel panic may lose the last commits. Group commit shares one
	// fsync among every message in the batch, so FULL stays affordable.
	SyncFull bool
	// Readers is the number of read-only connections (default 4).
	Readers int
	// MaxQueue bounds the writer's queue; past it, writes fail fast with ErrBusy (default 50,000).
	MaxQueue int
	// CheckpointEvery is the interval of the passive WAL checkpoint (default 1 s).
	CheckpointEvery time.Duration
	// WALPages is the WAL's size in pages (4 KiB) past which the writer checkpoints it itself
	// after a commit, so that the next commit starts the WAL again from its beginning
	// (default 16,384: 64 MiB; negative: never, the WAL then grows under steady writes).
	WALPages int
	// Listeners hear, in this order, each commit's messages (see CommitListener), after
	// the commit's requests are answered.
	Listeners []CommitListener
	// Counters hear each commit's messages before its requests are answered: in-memory
	// counts that an admission reads (the plans' conversations this month), so that a
	// request admitted after an ack sees the acked commit. Each delays the batch's acks:
	// keep them to a few map updates.
	Counters []CommitListener
	// CommitWindow is how long the writer waits for more messages to join a batch once the
	// arrival rate is at least WindowRate a second; below it, it commits at once. (A sleep
	// this short lasts about a millisecond in practice.) Default 500 µs; negative: never.
	CommitWindow time.Duration
	// WindowRate is the arrival rate (requests a second) from which CommitWindow applies.
	// Default 2,500.
	WindowRate float64

	// Logger hears the search indexer's failures and rebuilds (default: slog's default).
	Logger *slog.Logger

	// noSearch runs no indexer: the benchmarks' A/B of the index's cost.
	noSearch bool
	// searchChunk replaces indexChunk (tests: passes of a few rows), searchEvery indexEvery.
	searchChunk int
	searchEvery time.Duration
}

// Store is the SQLite file with its single writer.
type Store struct {
	path string
	opts Options
	// PreMigration is the copy of the database taken before this open migrated it ("": none).
	PreMigration string
	// unclean: the last run did not close the store (see Unclean).
	unclean bool

	w      *sqlite3.Conn // the write connection; used only by the writer goroutine
	wstmts stmtCache

	readers chan *reader
	ckpt    *sqlite3.Conn
	// ckptFile is ckpt's database file (writeback.go); nil where it could not be wrapped.
	ckptFile *writebackFile

	// committedBuf, convs and convAt are runTx's, kept from one commit to the next.
	committedBuf []Committed
	convs        []convUpdate
	convAt       map[int64]int

	mu        sync.Mutex
	queue     []request
	spare     []request
	closed    bool
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	ckptDone  chan struct{}
	ckptKick  chan struct{}   // the writer's WAL hook asks for a timer checkpoint now
	ckptTrunc chan chan error // TruncateWAL asks for a TRUNCATE checkpoint

	persistedWatermark int64
	// idx keeps the search index in search.db (searchindex.go); forgetTrimmed is the
	// newest search_forget row the writer has deleted once idx applied it.
	idx           *indexer
	forgetTrimmed int64
	// newestCommitted is newestMessage after the last commit, for readers off the writer.
	newestCommitted atomic.Int64
	trimDue         bool // the commit under way deletes the applied search_forget rows
	// watermark is the job publisher's, handed over by SetWatermark (-1: none yet).
	watermark     atomic.Int64
	persistedCuts []int64 // outbox_cuts above the watermark at open
	ids           ids     // message and conversation ids (ids.go); the writer's
	stats         Stats

	walPages   int       // frames in the WAL after the last commit (the writer's WAL hook)
	walTried   time.Time // the writer's last checkpoint
	walTriedAt int       // walPages then
	walKicked  int       // walPages when the hook last woke the timer's checkpoint
	// walAsked is when the writer, at WALPages, asked the timer's checkpoint for a pass
	// before its own (zero: it has not), and walAskedPass the timer's passes then.
	walAsked     time.Time
	walAskedPass int64
	wal          walStats
}

// Stats are counters the writer keeps for /metrics.
type Stats struct {
	mu              sync.Mutex
	Commits         int64
	MessagesSaved   int64
	BatchSizeSum    int64
	OnBatch         func(size int) // observer for the batch size histogram
	OnCommitLatency func(d time.Duration)
}

// Open opens (creating if needed) the database in dir, applies migrations and starts the writer.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = 50_000
	}
	if opts.CommitWindow == 0 {
		opts.CommitWindow = 500 * time.Microsecond
	}
	if opts.WindowRate <= 0 {
		opts.WindowRate = 2500
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if !sqliteFull {
		sqliteWarned.Do(func() {
			opts.Logger.Warn("SQLite's connections keep ncruces's 256 MiB reservation: the address space is limited (ulimit -v, LimitAS=) below what 4 GiB a connection needs (README \"Building\")",
				"limit_bytes", sqliteASLimit)
		})
	}
	if opts.WALPages == 0 {
		opts.WALPages = 16384 // a longer WAL copies a page rewritten by many commits once: bench/path.md
	}
	if err := makePrivate(dir, filepath.Join(dir, FileName)); err != nil {
		return nil, err
	}
	s := &Store{
		path:      filepath.Join(dir, FileName),
		opts:      opts,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		ckptDone:  make(chan struct{}),
		ckptKick:  make(chan struct{}, 1),
		convAt:    map[int64]int{},
		ckptTrunc: make(chan chan error),
	}
	s.watermark.Store(-1)
	uri, err := frameURI(s.path) // the writer's WAL frames in one write each (walvfs.go)
	if err != nil {
		return nil, err
	}
	w, err := openSQLite(uri, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.path, err)
	}
	s.w = w
	s.wstmts = stmtCache{conn: w}
	if err := setupConn(w); err != nil {
		w.Close()
		return nil, err
	}
	sync := "NORMAL"
	if opts.SyncFull {
		sync = "FULL"
	}
	// wal_autocheckpoint=0: a checkpoint inside a commit stalls it; the checkpointer
	// connection does it on a timer instead. cache_size 8 MB: a larger cache makes every
	// commit slower (SQLite walks the page cache at the end of each write transaction) and a
	// smaller one misses (bench/comments.md). secure_delete=FAST: a row updated or deleted
	// leaves no old copy in the free space of its page (an erasure's words must not outlive
	// it there; see erase.go), at the cost of zeroing what the page was being written with.
	if err := w.Exec(`PRAGMA journal_mode=WAL; PRAGMA synchronous=` + sync + `;
		PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=67108864;
		PRAGMA busy_timeout=5000; PRAGMA cache_size=-8000; PRAGMA temp_store=MEMORY;
		PRAGMA secure_delete=FAST`); err != nil {
		w.Close()
		return nil, fmt.Errorf("configure %s: %w", s.path, err)
	}
	if s.PreMigration, err = migrate(w, dir); err != nil {
		w.Close()
		return nil, err
	}
	// Runs in the writer goroutine, inside each commit.
	w.WALHook(func(_ *sqlite3.Conn, _ string, pages int) error {
		s.walHook(pages)
		return nil
	})
	// The WAL and shared-memory files now exist, made by SQLite with 0666 less the umask.
	if err := chmodExisting(0o600, s.path+"-wal", s.path+"-shm"); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.loadWatermark(); err != nil {
		w.Close()
		return nil, err
	}
	if err := s.loadIDs(); err != nil {
		w.Close()
		return nil, err
	}
	s.newestCommitted.Store(s.newestMessage())
	if s.idx, err = s.openIndexer(dir); err != nil {
		w.Close()
		return nil, err
	}
	// Synced whatever -sync says: a cut right after this start must still find it set.
	if err := w.Exec(`PRAGMA synchronous=FULL; UPDATE id_limits SET running = 1 WHERE id = 1; PRAGMA synchronous=` + sync); err != nil {
		s.closeConns() // the indexer's too
		return nil, err
	}
	s.readers = make(chan *reader, opts.Readers)
	for range opts.Readers {
		r, err := openReader(s.path, s.idx.path)
		if err != nil {
			s.closeConns()
			return nil, err
		}
		s.readers <- r
	}
	ckptURI, err := writebackURI(s.path) // its syncs cut up (writeback.go)
	if err != nil {
		s.closeConns()
		return nil, err
	}
	if s.ckpt, err = OpenConn(ckptURI, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE|sqlite3.OPEN_URI); err != nil {
		s.closeConns()
		return nil, err
	}
	if err := s.ckpt.BusyTimeout(time.Second); err != nil {
		s.closeConns()
		return nil, err
	}
	if f, err := s.ckpt.FileControl("main", sqlite3.FCNTL_FILE_POINTER); err == nil {
		if f, ok := f.(vfs.File); ok {
			s.ckptFile, _ = vfsutil.UnwrapFile[*writebackFile](f)
		}
	}
	go s.writeLoop()
	go s.checkpointLoop()
	if !opts.noSearch {
		go s.idx.run()
	} else {
		close(s.idx.done)
	}
	return s, nil
}

// makePrivate makes the data directory 0700 and the database file 0600 whatever the umask
// and whatever an older install left: the file holds every site's secrets.
func makePrivate(dir, db string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(db, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return chmodExisting(0o600, db, db+"-wal", db+"-shm")
}

func chmodExisting(mode os.FileMode, paths ...string) error {
	for _, p := range paths {
		if err := os.Chmod(p, mode); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// migrate applies the migrations above PRAGMA user_version, each in its own transaction.
func migrate(c *sqlite3.Conn, dir string) (copied string, err error) {
	migrations, err := schema.Migrations()
	if err != nil {
		return "", err
	}
	inUse := -1 // the version the file had before this open: 0 for a new one
	for _, m := range migrations {
		stmt, _, err := c.Prepare(`PRAGMA user_version`)
		if err != nil {
			return copied, err
		}
		stmt.Step()
		have := stmt.ColumnInt(0)
		stmt.Close()
		if inUse < 0 {
			inUse = have
		}
		if m.Version <= have {
			continue
		}
		if inUse > 0 && copied == "" {
			// A database in use is about to change: keep it as it was first.
			if copied, err = copyBeforeMigration(c, dir, have, migrations[len(migrations)-1].Version); err != nil {
				return "", err
			}
		}
		tx, err := c.BeginImmediate()
		if err != nil {
			return copied, err
		}
		err = c.Exec(m.SQL)
		if err == nil {
			err = c.Exec(fmt.Sprintf(`PRAGMA user_version=%d`, m.Version))
		}
		if err != nil {
			tx.Rollback()
			return copied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if err := tx.Commit(); err != nil {
			return copied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return copied, nil
}

// VacuumInto writes a consistent copy of c's database to dst, which must not exist: one read
// transaction, so the writer goes on meanwhile (a backup, the copy before a migration).
func VacuumInto(c *sqlite3.Conn, dst string) error {
	return c.Exec(`VACUUM INTO ` + sqlite3.Quote(dst))
}

// BackupsDir is the data directory's folder of the copies taken before migrations.
const BackupsDir = "backups"

// keepPreMigration is how many copies taken before migrations are kept (the newest).
const keepPreMigration = 3

// copyBeforeMigration writes a copy of the database (VACUUM INTO, synced) to
// backups/pre-<to>-from-<from>-<time>.db and drops the older such copies past keepPreMigration.
func copyBeforeMigration(c *sqlite3.Conn, dir string, from, to int) (string, error) {
	folder := filepath.Join(dir, BackupsDir)
	if err := os.MkdirAll(folder, 0o700); err != nil {
		return "", err
	}
	name := filepath.Join(folder, fmt.Sprintf("pre-%d-from-%d-%s.db", to, from, time.Now().UTC().Format("20060102T150405.000000Z")))
	if err := VacuumInto(c, name); err != nil {
		return "", fmt.Errorf("copy the database before migrating it to version %d: %w", to, err)
	}
	if err := os.Chmod(name, 0o600); err != nil {
		return "", err
	}
	if err := schema.SyncFile(name); err != nil {
		return "", err
	}
	// Oldest first by modification time (a name's time orders copies of one version only).
	type copied struct {
		name string
		at   time.Time
	}
	var all []copied
	names, _ := filepath.Glob(filepath.Join(folder, "pre-*.db"))
	for _, n := range names {
		if st, err := os.Stat(n); err == nil {
			all = append(all, copied{n, st.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, old := range all[:max(0, len(all)-keepPreMigration)] {
		_ = os.Remove(old.name)
	}
	return name, schema.SyncDir(folder)
}

func (s *Store) loadWatermark() error {
	stmt, _, err := s.w.Prepare(`SELECT published_through FROM outbox WHERE id = 1`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	if stmt.Step() {
		s.persistedWatermark = stmt.ColumnInt64(0)
	}
	if err := stmt.Err(); err != nil {
		return err
	}
	cuts, _, err := s.w.Prepare(`SELECT through FROM outbox_cuts WHERE through > ? ORDER BY through`)
	if err != nil {
		return err
	}
	defer cuts.Close()
	if err := cuts.BindInt64(1, s.persistedWatermark); err != nil {
		return err
	}
	for cuts.Step() {
		s.persistedCuts = append(s.persistedCuts, cuts.ColumnInt64(0))
	}
	return cuts.Err()
}

// OutboxCuts are the ends of the publish windows above the watermark read at open (see
// SaveOutboxCut), ascending: the windows the publisher re-forms at start.
func (s *Store) OutboxCuts() []int64 { return s.persistedCuts }

// PublishedThrough is the outbox watermark read at open: every job of the messages up to this
// id had been stored by JetStream.
func (s *Store) PublishedThrough() int64 { return s.persistedWatermark }

// SaveOutboxCut records the end of a publish window in the writer's transaction: the job
// publisher publishes a window's batches only after this is committed.
func (tx *Tx) SaveOutboxCut(through int64) error {
	return tx.exec(`INSERT OR IGNORE INTO outbox_cuts (through) VALUES (?)`, through)
}

// SaveCut persists a publish window's end in a write of its own and calls done once it is
// committed or failed; it never waits (the job publisher's ledger).
func (s *Store) SaveCut(through int64, done func(error)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done(s.Write(ctx, func(tx *Tx) error { return tx.SaveOutboxCut(through) }))
	}()
}

// SetWatermark hands over the job publisher's watermark: every job of the messages up to
// through is stored by JetStream. The writer persists it every 500 ms when it moved, and at
// Close. It is a lower bound, so persisting it late only means re-publishing a little more
// after a crash (JetStream's duplicate window drops those repeats).
func (s *Store) SetWatermark(through int64) { s.watermark.Store(through) }

// Unclean reports that the last run did not close the store: it crashed, was killed or lost
// its power.
func (s *Store) Unclean() bool { return s.unclean }

// Close stops accepting writes, commits what is queued, persists the watermark and closes.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	close(s.idx.stop)
	<-s.idx.done
	// A clean stop: every id given out is committed, so the next start may begin right after
	// them instead of at the limits (no gap in the ids after a restart).
	_ = s.w.Exec(fmt.Sprintf(`UPDATE id_limits SET messages = %d, conversations = %d, running = 0 WHERE id = 1`, s.ids.nextMsg, s.ids.nextConv))
	<-s.ckptDone
	return s.closeConns()
}

func (s *Store) closeConns() error {
	var errs []error
	if s.readers != nil {
		close(s.readers)
		for r := range s.readers {
			errs = append(errs, r.close())
		}
	}
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.Close())
	}
	if s.idx != nil {
		errs = append(errs, s.idx.close())
	}
	s.wstmts.close()
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// TruncateWAL copies the whole WAL into the database and empties the WAL file, so that what a
// commit deleted is in neither (an erasure). It fails with SQLITE_BUSY when a reader's
// snapshot or a burst of commits keeps it from finishing within the checkpoint connection's
// busy timeout; try again.
func (s *Store) TruncateWAL(ctx context.Context) error {
	done := make(chan error, 1)
	select {
	case s.ckptTrunc <- done:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ckptDone:
		return ErrClosed
	}
	select {
	case err := <-done:
		if err == nil && s.WALBytes() > 0 {
			err = errors.New("the WAL is not empty after the checkpoint (a reader held it); try again")
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkpointLoop copies the WAL back into the database from its own connection, every
// CheckpointEvery and whenever the WAL grew by another half of WALPages. PASSIVE never
// waits for the writer or readers, so a commit is never stalled by it.
func (s *Store) checkpointLoop() {
	defer close(s.ckptDone)
	t := time.NewTicker(s.opts.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			<-s.done // the writer has committed its last batch
			_ = s.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			return
		case <-t.C:
		case <-s.ckptKick:
		case done := <-s.ckptTrunc:
			done <- s.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			continue
		}
		if s.wal.timerStandsAside(time.Now()) {
			continue
		}
		s.wal.copying.Store(true)
		start := time.Now()
		until := start.Add(passYield)
		if s.ckptFile != nil {
			s.ckptFile.yieldUntil = until
		}
		writeBackFile(s.path+"-wal", until)
		if nLog, nCkpt, err := s.ckpt.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE); err == nil && nLog >= 0 {
			s.wal.timerPass.Store(int64(nLog)<<32 | int64(nCkpt))
		}
		s.wal.busy.Add(int64(time.Since(start)))
		s.wal.passes.Add(1)
		s.wal.copying.Store(false)
	}
}

// stmtCache prepares each statement once per connection.
type stmtCache struct {
	conn  *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt
}

func (c *stmtCache) get(sql string) (*sqlite3.Stmt, error) {
	if st, ok := c.stmts[sql]; ok {
		return st, nil
	}
	st, _, err := c.conn.Prepare(sql)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", sql, err)
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*sqlite3.Stmt)
	}
	c.stmts[sql] = st
	return st, nil
}

func (c *stmtCache) close() {
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}

// setupConn prepares a connection of the edge's: stable plans, and the FTS5 module that
// messages_fts needs (this SQLite build links it as an extension, registered per connection).
func setupConn(c *sqlite3.Conn) error {
	if err := stablePlans(c); err != nil {
		return err
	}
	if err := fts5.Register(c); err != nil {
		return fmt.Errorf("register fts5: %w", err)
	}
	return nil
}

// OpenConn opens the database file at path outside the store (a backup's copy, a restore's
// check), ready for every table of its schema: messages_fts needs FTS5 registered.
func OpenConn(path string, flags sqlite3.OpenFlag) (*sqlite3.Conn, error) {
	c, err := openSQLite(path, flags)
	if err != nil {
		return nil, err
	}
	if err := fts5.Register(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("register fts5: %w", err)
	}
	return c, nil
}

// stablePlans turns on the query planner stability guarantee. This build of SQLite has
// STAT4, and without it the planner let the values bound to a cached statement shape its
// plan, so binding new ones expired the statement: every visitor lookup and every resume
// was parsed and planned again (see bench/comments.md for what a reconnect storm paid).
func stablePlans(c *sqlite3.Conn) error {
	if _, err := c.Config(sqlite3.DBCONFIG_ENABLE_QPSG, true); err != nil {
		return fmt.Errorf("enable the query planner stability guarantee: %w", err)
	}
	return nil
}

// reader is one read-only connection with its prepared statements.
type reader struct {
	conn  *sqlite3.Conn
	stmts stmtCache
	gen   int64 // the indexer's gen when search.db was attached
	// detached: a re-attach failed half way (search.db is not attached).
	detached bool
}

// openReader opens a reader of the database at path with the search index at search
// attached as "search" (searchindex.go).
func openReader(path, search string) (*reader, error) {
	c, err := openSQLite(path, sqlite3.OPEN_READONLY)
	if err != nil {
		return nil, fmt.Errorf("open reader: %w", err)
	}
	if err := c.BusyTimeout(5 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	if err := setupConn(c); err != nil {
		c.Close()
		return nil, err
	}
	if err := attachSearch(c, search); err != nil {
		c.Close()
		return nil, err
	}
	return &reader{conn: c, stmts: stmtCache{conn: c}}, nil
}

// attachSearch attaches the search index at path to a reader as "search".
func attachSearch(c *sqlite3.Conn, path string) error {
	if err := execConn(c, `ATTACH DATABASE ? AS search`, path); err != nil {
		return fmt.Errorf("attach the search index: %w", err)
	}
	return nil
}

func (r *reader) close() error {
	r.stmts.close()
	return r.conn.Close()
}

// Read runs fn on a read-only connection from the pool. The statement it gets from q is
// prepared once per connection and reset after fn returns.
func (s *Store) Read(ctx context.Context, fn func(q Querier) error) error {
	var r *reader
	select {
	case r = <-s.readers:
	case <-ctx.Done():
		return ctx.Err()
	}
	if r == nil {
		return ErrClosed
	}
	defer func() { s.readers <- r }()
	if gen := s.idx.gen.Load(); gen != r.gen {
		// search.db was built again: this connection still reads the removed file.
		if !r.detached {
			if err := execConn(r.conn, `DETACH DATABASE search`); err != nil {
				return fmt.Errorf("detach the old search index: %w", err)
			}
			r.detached = true
		}
		if err := attachSearch(r.conn, s.idx.path); err != nil {
			return err
		}
		r.gen, r.detached = gen, false
	}
	q := Querier{cache: &r.stmts}
	defer q.resetAll()
	return fn(q)
}

// Querier hands out cached prepared statements on one connection.
type Querier struct {
	cache *stmtCache
}

// Stmt returns the prepared statement for sql; it is reset when the caller is done.
func (q Querier) Stmt(sql string) (*sqlite3.Stmt, error) { return q.cache.get(sql) }

func (q Querier) resetAll() {
	for _, st := range q.cache.stmts {
		st.Reset()
		st.ClearBindings()
	}
}
