// Package lazyfs is a FUSE filesystem for power-cut tests, after Jepsen's LazyFS: it passes
// everything through to a backing folder, but remembers, for every file, what its bytes were
// at its last fsync. Cut drops every write made since (optionally tearing the last one), so
// the backing folder holds what a disk would after a power cut: what was synced, nothing
// after. A whole data folder on it (SQLite and its WAL, JetStream's store, attachments, keys)
// loses its unsynced writes at the same moment, as with a real cut.
//
// What it models: file contents and sizes. What it does not: directory entries (a file created
// or renamed and never synced keeps its name, with the contents its inode had synced: a new
// file comes back empty, as ext4's delayed allocation leaves it), and the order in which a
// disk would have written unsynced pages (all of them are lost, the harshest case but one).
//
// Writes are made to the backing file at once (reads need nothing special); the first write
// over a synced byte saves that byte, and Cut puts the saved bytes back and truncates each
// file to its synced size. fsync only records the sync: durability is the model's.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted lazy filesystem.
type FS struct {
	backing, mnt string
	server       *fuse.Server

	mu    sync.Mutex
	files map[uint64]*file // by the backing file's inode: a rename keeps its state
	last  *lastWrite       // the latest write since any sync, for a torn cut
	cut   bool
}

// file is one file's writes since its last fsync.
type file struct {
	synced int64    // its size at the last fsync (or when first written here)
	saved  []extent // synced bytes since overwritten, as they were; ascending, disjoint
	dirty  bool
}

type extent struct {
	off  int64
	data []byte
}

type lastWrite struct {
	ino  uint64
	off  int64
	data []byte
}

// Mount mounts a lazy view of backing on mnt (both folders must exist). It needs /dev/fuse
// and root (it mounts directly, without fusermount).
func Mount(backing, mnt string) (*FS, error) {
	l := &FS{backing: backing, mnt: mnt, files: make(map[uint64]*file)}
	root := &gofs.LoopbackRoot{Path: backing}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root.Dev = st.Dev
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, fs: l}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	sec := time.Second
	srv, err := gofs.Mount(mnt, root.RootNode, &gofs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{DirectMountStrict: true, FsName: "lazyfs", Name: "lazyfs"},
	})
	if err != nil {
		return nil, fmt.Errorf("mount lazyfs on %s: %w", mnt, err)
	}
	l.server = srv
	return l, nil
}

// Available says why lazyfs cannot mount here ("" when it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "lazyfs mounts directly and needs root"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "no /dev/fuse: " + err.Error()
	}
	return ""
}

// CutReport says what a cut dropped.
type CutReport struct {
	Files int   // files that lost writes
	Bytes int64 // bytes put back or cut off
	Torn  bool  // the last write was kept in part
}

// Cut is the power cut: it unmounts (every process using the folder must be gone: kill them
// first), then puts every file back as it was at its last fsync. With tear, a sector-aligned
// part of the latest unsynced write survives, as when the power fails mid-write.
func (l *FS) Cut(tear bool) (CutReport, error) {
	if err := l.unmount(); err != nil {
		return CutReport{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	paths := map[uint64]string{}
	_ = filepath.WalkDir(l.backing, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				paths[info.Sys().(*syscall.Stat_t).Ino] = p
			}
		}
		return nil
	})
	var rep CutReport
	for ino, f := range l.files {
		p, ok := paths[ino]
		if !ok || !f.dirty {
			continue // removed since: gone either way
		}
		n, err := f.restore(p)
		if err != nil {
			return rep, fmt.Errorf("cut %s: %w", p, err)
		}
		rep.Files++
		rep.Bytes += n
		if tear && l.last != nil && l.last.ino == ino {
			if err := tearInto(p, l.last); err != nil {
				return rep, err
			}
			rep.Torn = true
		}
	}
	return rep, nil
}

// Unmount unmounts without a cut (a clean stop: everything written stays).
func (l *FS) Unmount() error { return l.unmount() }

func (l *FS) unmount() error {
	var err error
	for range 50 {
		if err = l.server.Unmount(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // a killed process's files are still closing
	}
	return fmt.Errorf("unmount %s: %w", l.mnt, err)
}

// restore writes the saved bytes back and truncates the file to its synced size.
func (f *file) restore(path string) (int64, error) {
	fd, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer fd.Close()
	info, err := fd.Stat()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range f.saved {
		if _, err := fd.WriteAt(e.data, e.off); err != nil {
			return n, err
		}
		n += int64(len(e.data))
	}
	if info.Size() != f.synced {
		n += max(info.Size()-f.synced, 0)
		if err := fd.Truncate(f.synced); err != nil {
			return n, err
		}
	}
	return n, nil
}

// tearInto keeps the first sectors of the latest write (at least one, never all of it).
func tearInto(path string, w *lastWrite) error {
	sectors := len(w.data) / 512
	if sectors < 2 {
		return nil // too short to tear
	}
	keep := (1 + rand.IntN(sectors-1)) * 512
	fd, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer fd.Close()
	_, err = fd.WriteAt(w.data[:keep], w.off)
	return err
}

// state is the record of ino, made with the file's size when first seen: what was there
// before the mount counts as synced.
func (l *FS) state(ino uint64, size int64) *file {
	f := l.files[ino]
	if f == nil {
		f = &file{synced: size}
		l.files[ino] = f
	}
	return f
}

// save keeps, before [off, off+n) of fd is overwritten or cut off, the synced bytes of that
// range not kept yet.
func (l *FS) save(fd int, ino uint64, off, n int64) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	f := l.state(ino, st.Size)
	f.dirty = true
	end := min(off+n, f.synced)
	for _, gap := range f.gaps(off, end) {
		buf := make([]byte, gap[1]-gap[0])
		m, err := syscall.Pread(fd, buf, gap[0])
		if err != nil {
			return err
		}
		f.add(extent{gap[0], buf[:m]})
	}
	return nil
}

// gaps are the parts of [a, b) that no saved extent covers.
func (f *file) gaps(a, b int64) [][2]int64 {
	var out [][2]int64
	for _, e := range f.saved {
		if a >= b {
			break
		}
		ea, eb := e.off, e.off+int64(len(e.data))
		if eb <= a {
			continue
		}
		if ea >= b {
			break
		}
		if ea > a {
			out = append(out, [2]int64{a, ea})
		}
		a = max(a, eb)
	}
	if a < b {
		out = append(out, [2]int64{a, b})
	}
	return out
}

func (f *file) add(e extent) {
	if len(e.data) == 0 {
		return
	}
	i := sort.Search(len(f.saved), func(i int) bool { return f.saved[i].off > e.off })
	f.saved = append(f.saved, extent{})
	copy(f.saved[i+1:], f.saved[i:])
	f.saved[i] = e
}

// synced records an fsync of ino: its bytes now are what a cut leaves.
func (l *FS) synced(fd int, ino uint64) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return
	}
	f := l.state(ino, st.Size)
	f.synced, f.saved, f.dirty = st.Size, nil, false
	if l.last != nil && l.last.ino == ino {
		l.last = nil
	}
}

// node is a loopback node whose files are lazy.
type node struct {
	gofs.LoopbackNode
	fs *FS
}

var (
	_ gofs.NodeOpener    = (*node)(nil)
	_ gofs.NodeCreater   = (*node)(nil)
	_ gofs.NodeSetattrer = (*node)(nil)
)

func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// truncating saves what opening path with O_TRUNC would throw away.
func (n *node) truncating(path string, flags uint32) syscall.Errno {
	if flags&syscall.O_TRUNC == 0 {
		return 0
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY, 0)
	if errors.Is(err, syscall.ENOENT) {
		return 0
	}
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	return gofs.ToErrno(n.fs.save(fd, st.Ino, 0, st.Size))
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := n.truncating(n.path(), flags); errno != 0 {
		return nil, 0, errno
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.fs.wrap(fh), fl, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	p := filepath.Join(n.path(), name)
	if errno := n.truncating(p, flags); errno != 0 {
		return nil, nil, 0, errno
	}
	_, existed := os.Stat(p)
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	lf := n.fs.wrap(fh)
	if existed != nil { // new: nothing of it is synced yet
		lf.withFd(func(fd int) syscall.Errno {
			var st syscall.Stat_t
			if syscall.Fstat(fd, &st) == nil {
				n.fs.mu.Lock()
				n.fs.files[st.Ino] = &file{dirty: true} // an inode number may be a removed file's
				n.fs.mu.Unlock()
			}
			return 0
		})
	}
	return ch, lf, fl, 0
}

// Setattr on a path (truncate(2) without a file handle) saves what a shrink cuts off.
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && f == nil {
		if fd, err := syscall.Open(n.path(), syscall.O_RDONLY, 0); err == nil {
			var st syscall.Stat_t
			if syscall.Fstat(fd, &st) == nil && int64(sz) < st.Size {
				n.fs.mu.Lock()
				err = n.fs.save(fd, st.Ino, int64(sz), st.Size-int64(sz))
				n.fs.mu.Unlock()
			}
			syscall.Close(fd)
			if err != nil {
				return gofs.ToErrno(err)
			}
		}
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

func (l *FS) wrap(fh gofs.FileHandle) *lazyFile {
	return &lazyFile{LoopbackFile: fh.(*gofs.LoopbackFile), fs: l}
}

// lazyFile is an open file whose writes are remembered until its next fsync.
type lazyFile struct {
	*gofs.LoopbackFile
	fs *FS
}

var (
	_ gofs.FileWriter    = (*lazyFile)(nil)
	_ gofs.FileFsyncer   = (*lazyFile)(nil)
	_ gofs.FileSetattrer = (*lazyFile)(nil)
	_ gofs.FileAllocater = (*lazyFile)(nil)
)

// PassthroughFd says no: with kernel passthrough, writes would not come here.
func (f *lazyFile) PassthroughFd() (int, bool) { return 0, false }

func (f *lazyFile) withFd(fn func(fd int) syscall.Errno) syscall.Errno {
	fd, ok := f.LoopbackFile.PassthroughFd() // the backing fd, however it is reached
	if !ok {
		return syscall.EBADF
	}
	return fn(fd)
}

func (f *lazyFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	var n int
	errno := f.withFd(func(fd int) syscall.Errno {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return gofs.ToErrno(err)
		}
		f.fs.mu.Lock()
		defer f.fs.mu.Unlock()
		if f.fs.cut {
			return syscall.EIO // the power is off
		}
		if err := f.fs.save(fd, st.Ino, off, int64(len(data))); err != nil {
			return gofs.ToErrno(err)
		}
		var err error
		n, err = syscall.Pwrite(fd, data, off)
		f.fs.last = &lastWrite{ino: st.Ino, off: off, data: append([]byte(nil), data...)}
		return gofs.ToErrno(err)
	})
	return uint32(n), errno
}

func (f *lazyFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return f.withFd(func(fd int) syscall.Errno {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return gofs.ToErrno(err)
		}
		f.fs.mu.Lock()
		defer f.fs.mu.Unlock()
		f.fs.synced(fd, st.Ino)
		return 0
	})
}

func (f *lazyFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		if errno := f.withFd(func(fd int) syscall.Errno {
			var st syscall.Stat_t
			if err := syscall.Fstat(fd, &st); err != nil {
				return gofs.ToErrno(err)
			}
			f.fs.mu.Lock()
			defer f.fs.mu.Unlock()
			if int64(sz) < st.Size {
				return gofs.ToErrno(f.fs.save(fd, st.Ino, int64(sz), st.Size-int64(sz)))
			}
			f.fs.state(st.Ino, st.Size).dirty = true // grown: the new length is not synced
			return 0
		}); errno != 0 {
			return errno
		}
	}
	return f.LoopbackFile.Setattr(ctx, in, out)
}

// Allocate grows the file (fallocate): the new length is not synced until an fsync.
func (f *lazyFile) Allocate(ctx context.Context, off uint64, sz uint64, mode uint32) syscall.Errno {
	f.withFd(func(fd int) syscall.Errno {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			f.fs.mu.Lock()
			f.fs.state(st.Ino, st.Size).dirty = true
			f.fs.mu.Unlock()
		}
		return 0
	})
	return f.LoopbackFile.Allocate(ctx, off, sz, mode)
}
