package store

import (
	"net/url"
	"path/filepath"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3/vfs"
)

// SQLite appends each WAL frame with two writes: its 24-byte header, then the page right
// after it. The writer's connection opens its WAL through frameVFS, which holds a frame's
// header back and writes it with its page in one pwrite: one system call a frame instead of
// two (bench/path.md). Nothing can see the difference: SQLite writes the page immediately
// after the header, and a frame is visible to readers (here or in another process) only once
// the commit has published the WAL index, after both writes returned. Any other call on the
// file writes a header still held first.
const (
	frameVFSName = "spookat-frames"
	frameHeader  = 24
)

type frameVFS struct{ vfs.VFSFilename }

func init() {
	vfs.Register(frameVFSName, frameVFS{vfs.Find("").(vfs.VFSFilename)})
}

// framesWhole counts frames written with their header in one call, for tests.
var framesWhole atomic.Int64

func (v frameVFS) Open(name string, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, flags, err := v.VFSFilename.Open(name, flags)
	return wrapWAL(f, flags, err)
}

func (v frameVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, flags, err := v.VFSFilename.OpenFilename(name, flags)
	return wrapWAL(f, flags, err)
}

func wrapWAL(f vfs.File, flags vfs.OpenFlag, err error) (vfs.File, vfs.OpenFlag, error) {
	if err != nil || flags&vfs.OPEN_WAL == 0 {
		return f, flags, err
	}
	return &frameFile{File: f}, flags, nil
}

// frameURI opens path through frameVFS.
func frameURI(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: "vfs=" + frameVFSName}).String(), nil
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
	if h, ok := f.File.(vfs.FileSizeHint); ok {
		return h.SizeHint(size)
	}
	return nil
}
