package store

import (
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// On the edge's usual one core (GOMAXPROCS 1), a goroutine in a system call keeps the
// scheduler's only P until the runtime's monitor takes it back, and on a busy process the
// monitor looks only every few milliseconds. The timer's checkpoint ends each pass with two
// fdatasyncs (the WAL before copying, the database after), and each waits for every page
// written since the last one: 3 to 10 ms during which no socket was read and no commit ran
// (bench/path.md, fourth and tenth sessions). The checkpoint's connection therefore opens the
// database through the spookat-checkpoint VFS, whose files sync off the P (offPSync): the
// others run while the disk works. Durability is SQLite's as before. (The kernel used to be
// told to start writing a pass's pages 256 KiB at a time, sync_file_range, before those
// syncs; once they left the P that only cost CPU: bench/path.md, eighteenth session.)
const checkpointVFSName = "spookat-checkpoint"

func init() {
	registerWrapper(checkpointVFSName, func(f vfs.File, flags vfs.OpenFlag) vfs.File {
		fd := fileFd(f)
		if fd < 0 || flags&(vfs.OPEN_MAIN_DB|vfs.OPEN_WAL) == 0 {
			return f
		}
		return &offPFile{File: f, offPSync: offPSync{fd: fd}}
	})
}

// checkpointURI opens path through the spookat-checkpoint VFS.
func checkpointURI(path string) (string, error) { return vfsURI(path, checkpointVFSName) }

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
