package store

import (
	"encoding/binary"
	"net/url"
	"path/filepath"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"
)

// SQLite appends a commit's WAL frames one by one, each with two writes: its 24-byte header,
// then the page right after it. The writer's connection opens its WAL through the
// spookat-frames VFS, which gathers a commit's frames and writes them in one pwrite when the
// commit's own frame comes (its header carries the database's size, the others' a zero): one
// system call a commit instead of two a frame (bench/path.md). Nothing can see the
// difference: a commit's frames are visible to readers (here or in another process, such as
// Litestream or the sqlite3 shell) only once SQLite has published the WAL index, after the
// commit frame's write returned, and SQLite calls nothing else on the WAL in between. Frames
// of a large transaction (spilled before its commit) go out each time gatherMax is
// reached; any other call on the file (a read, a sync, an overwrite) writes what is gathered
// first.
const (
	frameVFSName = "spookat-frames"
	frameHeader  = 24
	// gatherMax bounds what a frameFile holds before writing it: a commit of the visitors'
	// path is a few dozen pages; a purge's or a migration's large one goes out in pieces.
	gatherMax = 256 << 10
)

func init() {
	registerWrapper(frameVFSName, func(f vfs.File, flags vfs.OpenFlag) vfs.File {
		if flags&vfs.OPEN_WAL == 0 {
			return f
		}
		return &frameFile{File: f}
	})
}

// framesWhole counts frames written with their header in one call, and frameWrites the
// calls that wrote gathered frames, for tests.
var framesWhole, frameWrites atomic.Int64

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
func vfsURI(path, name string) (string, error) { return fileURI(path, "vfs="+name) }

// fileURI is the SQLite URI of path (made absolute, escaped) with query.
func fileURI(path, query string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: query}).String(), nil
}

type frameFile struct {
	vfs.File
	// gathered holds whole frames (and at its end maybe a header waiting for its page) not
	// yet written, which belong at gatheredAt.
	gathered   []byte
	gatheredAt int64
	frames     int64 // whole frames in gathered
	headerLast bool  // gathered ends with a header whose page has not come
}

func (f *frameFile) Unwrap() vfs.File { return f.File }

// flush writes what is gathered.
func (f *frameFile) flush() error {
	if len(f.gathered) == 0 {
		return nil
	}
	b, frames := f.gathered, f.frames
	f.gathered, f.frames, f.headerLast = f.gathered[:0], 0, false
	_, err := f.File.WriteAt(b, f.gatheredAt)
	if err == nil {
		framesWhole.Add(frames)
		frameWrites.Add(1)
	}
	return err
}

func (f *frameFile) WriteAt(p []byte, off int64) (int, error) {
	end := f.gatheredAt + int64(len(f.gathered))
	switch {
	case f.headerLast && off == end:
		// The page of the header gathered last: the frame is whole. A commit's frame ends
		// the commit: write it all before SQLite makes it visible.
		f.gathered = append(f.gathered, p...)
		f.frames++
		f.headerLast = false
		hdr := f.gathered[len(f.gathered)-len(p)-frameHeader:]
		if commit := binary.BigEndian.Uint32(hdr[4:8]) != 0; commit || len(f.gathered) >= gatherMax {
			if err := f.flush(); err != nil {
				return 0, err
			}
		}
		return len(p), nil
	case len(p) == frameHeader && !f.headerLast && (len(f.gathered) == 0 || off == end):
		// A frame's header: p is SQLite's memory, which may change before the page comes.
		if len(f.gathered) == 0 {
			f.gatheredAt = off
		}
		f.gathered = append(f.gathered, p...)
		f.headerLast = true
		return len(p), nil
	}
	if err := f.flush(); err != nil {
		return 0, err
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
