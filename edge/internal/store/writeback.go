package store

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// On the edge's usual one core (GOMAXPROCS 1), a goroutine in a system call keeps the
// scheduler's only P until the runtime's monitor takes it back, and on a busy process the
// monitor looks only every few milliseconds. The timer's checkpoint ends each pass with two
// fdatasyncs (the WAL before copying, the database after), and each waited for every page
// written since the last one: 0.5 to 9 ms during which no socket was read and no commit ran
// (bench/path.md, fourth session). The checkpoint's connection therefore opens the database
// through the spookat-writeback VFS, which has the kernel start writing what the pass dirtied
// a slice at a time (sync_file_range, without waiting: a call that waited held the P too,
// ~10 % of the wall clock at 10,000 messages/s; bench/path.md, sixth session); the WAL's
// pages are started the same way before the pass begins. The fdatasyncs SQLite still makes
// then find most of it written: durability is SQLite's as before. Those fdatasyncs (the
// WAL's before a pass copies, the database's after) still waited 3–10 ms each, holding the
// P: they leave it to the others now (offPSync).
const (
	writebackVFSName = "spookat-writeback"
	writebackSlice   = 256 << 10
)

func init() {
	registerWrapper(writebackVFSName, func(f vfs.File, flags vfs.OpenFlag) vfs.File {
		fd := fileFd(f)
		switch {
		case fd < 0:
			return f
		case flags&vfs.OPEN_MAIN_DB != 0:
			return &writebackFile{offPFile: offPFile{File: f, offPSync: offPSync{fd: fd}}, lo: -1}
		case flags&vfs.OPEN_WAL != 0:
			return &offPFile{File: f, offPSync: offPSync{fd: fd}}
		}
		return f
	})
}

// writebackSlices counts the slices written ahead of a sync, for tests.
var writebackSlices atomic.Int64

// writebackURI opens path through the spookat-writeback VFS.
func writebackURI(path string) (string, error) { return vfsURI(path, writebackVFSName) }

// writebackFile is the checkpoint connection's database file: what it writes goes to the
// disk a slice at a time rather than all at its fdatasync.
type writebackFile struct {
	offPFile       // the file, its descriptor and how it syncs
	lo, hi   int64 // the range written since the last slice went out (lo -1: none)
	pending  int64 // bytes written in it
	// yieldUntil is when the pass under way stops yielding (set by checkpointLoop).
	yieldUntil time.Time
	// err is the first error a slice met, for the next Sync: the kernel reports a write
	// error once per open file, and on this file the slice's call, not SQLite's fdatasync,
	// would have taken it.
	err error
}

func (f *writebackFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if f.lo < 0 || off < f.lo {
		f.lo = off
	}
	f.hi = max(f.hi, off+int64(n))
	if f.pending += int64(n); f.pending >= writebackSlice {
		f.writeBack()
	}
	return n, err
}

func (f *writebackFile) Sync(flags vfs.SyncFlag) error {
	f.writeBack()
	if err := f.err; err != nil {
		f.err = nil
		return err
	}
	return f.sync(f.File, flags)
}

// writeBack has the kernel start writing the range dirtied since the last slice.
func (f *writebackFile) writeBack() {
	if f.lo < 0 {
		return
	}
	if err := writeRange(f.fd, f.lo, f.hi-f.lo, f.yieldUntil); err != nil && f.err == nil {
		f.err = err
	}
	f.lo, f.hi, f.pending = -1, 0, 0
	writebackSlices.Add(1)
}

// writeBackFile starts writing the dirty pages of the file at path (the WAL) a slice at a time, but
// for its last slice, where the writer appends: on a device with stable pages, its writes
// would wait for that slice. A file that is not there has nothing to write. Errors are left
// to SQLite's fdatasync of the WAL, on a file of its own, which the kernel tells as well.
func writeBackFile(path string, yieldUntil time.Time) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	for off := int64(0); off+writebackSlice < fi.Size(); off += writebackSlice {
		if writeRange(int(f.Fd()), off, writebackSlice, yieldUntil) != nil {
			return
		}
	}
}

// writeRange starts writing the dirty pages of [off, off+n) of fd. A call that waited (the
// device's queue was full) held the P meanwhile: then, until yieldUntil, every goroutine
// waiting for it runs before the next slice. A yield costs the whole run queue's turn (under
// load, tens of milliseconds), so
// none after a call that found nothing to write, and none once the pass has had its time:
// the WAL grows while the writer waits for the pass (walCheckpoint), and a pass that yielded
// after every slice let it reach 39 MB in a soak.
func writeRange(fd int, off, n int64, yieldUntil time.Time) error {
	start := time.Now()
	err := syncRange(fd, off, n)
	if now := time.Now(); now.Sub(start) > 100*time.Microsecond && now.Before(yieldUntil) {
		runtime.Gosched()
	}
	return err
}

// passYield is how long a pass of the timer's checkpoint yields after its slices.
const passYield = 50 * time.Millisecond

// fileFd is the descriptor of a file the default VFS opened (-1 when it has none).
func fileFd(f vfs.File) int {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		return int(fd.Fd())
	}
	return -1
}

// offPSync is how the timer checkpoint's and the search index's files sync: through the file
// itself the first time (the default VFS then syncs a new file's directory too, once), from
// then on by syncData, which leaves the P to the other goroutines while the disk works. The
// file's own Sync is not called after syncData: the writer may append to the WAL meanwhile,
// so a second fdatasync would wait again, holding the P.
type offPSync struct {
	fd     int // -1: none (the file's own Sync every time)
	synced bool
}

func (o *offPSync) sync(f vfs.File, flags vfs.SyncFlag) error {
	if o.fd < 0 || !o.synced || !syncOffP {
		err := f.Sync(flags)
		o.synced = o.synced || err == nil
		return err
	}
	return syncData(uintptr(o.fd))
}

// offPFile is a database file or a WAL synced by offPSync. SharedMemory, MemoryMapper,
// LockState, PowersafeOverwrite, PersistWAL, SizeHint and HasMoved are the optional parts of a
// database file the VFS layer asks for by type: passed on to the file wrapped.
type offPFile struct {
	vfs.File
	offPSync
}

func (f *offPFile) Unwrap() vfs.File                { return f.File }
func (f *offPFile) Sync(flags vfs.SyncFlag) error   { return f.sync(f.File, flags) }
func (f *offPFile) SharedMemory() vfs.SharedMemory  { return vfsutil.WrapSharedMemory(f.File) }
func (f *offPFile) MemoryMapper() vfs.MemoryMapper  { return vfsutil.WrapMemoryMapper(f.File) }
func (f *offPFile) LockState() vfs.LockLevel        { return vfsutil.WrapLockState(f.File) }
func (f *offPFile) PowersafeOverwrite() bool        { return vfsutil.WrapPowersafeOverwrite(f.File) }
func (f *offPFile) PersistWAL() bool                { return vfsutil.WrapPersistWAL(f.File) }
func (f *offPFile) SizeHint(size int64) error       { return vfsutil.WrapSizeHint(f.File, size) }
func (f *offPFile) HasMoved() (bool, error)         { return vfsutil.WrapHasMoved(f.File) }
func (f *offPFile) SetPowersafeOverwrite(psow bool) { vfsutil.WrapSetPowersafeOverwrite(f.File, psow) }
func (f *offPFile) SetPersistWAL(keep bool)         { vfsutil.WrapSetPersistWAL(f.File, keep) }
