package store

import (
	"net/url"
	"path/filepath"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// SQLite appends each WAL frame with two writes: its 24-byte header, then the page right after
// it. The writer's connection opens its WAL through the spookat-frames VFS, which holds a
// frame's header back and writes it with its page in one pwrite: one system call a frame
// instead of two (bench/path.md). Nothing can see the difference: SQLite writes the page
// immediately after the header, and a frame is visible to readers (here or in another process)
// only once the commit has published the WAL index, after both writes returned. Any other call
// on the file writes a header still held first.
const (
	frameVFSName = "spookat-frames"
	frameHeader  = 24
)

func init() {
	registerWrapper(frameVFSName, func(f vfs.File, flags vfs.OpenFlag) vfs.File {
		if flags&vfs.OPEN_WAL == 0 {
			return f
		}
		return &frameFile{File: f}
	})
}

// framesWhole counts frames written with their header in one call, for tests.
var framesWhole atomic.Int64

// frameURI opens path through the spookat-frames VFS.
func frameURI(path string) (string, error) { return vfsURI(path, frameVFSName) }

// wrapperVFS is the default VFS with each file it opens passed through wrap, which returns
// the file itself or a wrapper of it.
type wrapperVFS struct {
	vfs.VFSFilename
	wrap func(vfs.File, vfs.OpenFlag) vfs.File
}

func registerWrapper(name string, wrap func(vfs.File, vfs.OpenFlag) vfs.File) {
	vfs.Register(name, wrapperVFS{vfs.Find("").(vfs.VFSFilename), wrap})
}

func (v wrapperVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, flags, err := v.VFSFilename.Open(name, flags)
	if err != nil {
		return f, flags, err
	}
	return v.wrap(f, flags), flags, nil
}

func (v wrapperVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, flags, err := v.VFSFilename.OpenFilename(name, flags)
	if err != nil {
		return f, flags, err
	}
	return v.wrap(f, flags), flags, nil
}

// vfsURI is the URI that opens path through the VFS registered as name.
func vfsURI(path, name string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: "vfs=" + name}).String(), nil
}

type frameFile struct {
	vfs.File
	held   bool
	hdrAt  int64
	hdr    [frameHeader]byte
	joined []byte
}

func (f *frameFile) Unwrap() vfs.File { return f.File }

// flush writes a header still held.
func (f *frameFile) flush() error {
	if !f.held {
		return nil
	}
	f.held = false
	_, err := f.File.WriteAt(f.hdr[:], f.hdrAt)
	return err
}

func (f *frameFile) WriteAt(p []byte, off int64) (int, error) {
	if f.held && off == f.hdrAt+frameHeader {
		f.held = false
		f.joined = append(append(f.joined[:0], f.hdr[:]...), p...)
		n, err := f.File.WriteAt(f.joined, f.hdrAt)
		if err == nil {
			framesWhole.Add(1)
		}
		return max(n-frameHeader, 0), err
	}
	if err := f.flush(); err != nil {
		return 0, err
	}
	if len(p) == frameHeader {
		copy(f.hdr[:], p) // p is SQLite's memory: it may change before the page comes
		f.held, f.hdrAt = true, off
		return len(p), nil
	}
	return f.File.WriteAt(p, off)
}

func (f *frameFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *frameFile) Sync(flags vfs.SyncFlag) error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Sync(flags)
}

func (f *frameFile) Truncate(size int64) error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *frameFile) Size() (int64, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.Size()
}

func (f *frameFile) Close() error {
	err := f.flush()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// SizeHint passes SQLITE_FCNTL_SIZE_HINT on when the file takes it.
func (f *frameFile) SizeHint(size int64) error {
	if err := f.flush(); err != nil {
		return err
	}
	return vfsutil.WrapSizeHint(f.File, size)
}
