package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3/vfs"

	"spookat/schema/testkit"
)

// The timer's checkpoint writes what it copies a slice at a time (writeback.go) and still
// copies everything: after a pass begun once every message was committed, the database file
// alone, without its WAL, holds them all. The directory's name needs escaping in the URI the
// checkpoint opens.
func TestCheckpointWritesBackInSlices(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SKIPPED: sync_file_range is Linux's; elsewhere the checkpoint's fdatasync writes everything")
	}
	dir := filepath.Join(t.TempDir(), "a b?c#d%e")
	s := openTest(t, dir, Options{CheckpointEvery: time.Hour, WALPages: -1})
	defer s.Close()
	site := addSite(t, s)
	const n = 600
	for i := range n {
		submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: fmt.Appendf(nil, "v%d", i%50), Author: "visitor",
			Text: fmt.Sprintf("message %d %s", i, strings.Repeat("x", 3000)), ClientID: fmt.Sprint(i)})
	}
	if s.ckptFile == nil {
		t.Fatal("the checkpoint's connection did not open its database through the spookat-writeback VFS")
	}
	slices0 := writebackSlices.Load()
	s.ckptKick <- struct{}{}
	testkit.WaitFor(t, "the timer's checkpoint to copy the WAL", 10*time.Second, func() bool {
		return writebackSlices.Load()-slices0 >= 2 && !s.wal.copying.Load()
	})

	if st := s.WALStats(); st.TimerPasses < 1 || st.TimerBusy <= 0 {
		t.Fatalf("WALStats after a pass: %d timer passes, %v busy", st.TimerPasses, st.TimerBusy)
	}

	cut := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	testkit.NoErr(t, err)
	testkit.NoErr(t, os.WriteFile(filepath.Join(cut, FileName), b, 0o600))
	if got := countRows(t, filepath.Join(cut, FileName), "messages"); got != n {
		t.Fatalf("the database file after the checkpoint holds %d messages, want %d", got, n)
	}
}

// A write error a slice met reaches SQLite through the next Sync: on the checkpoint's file the
// kernel reports it to the slice's call only, and a checkpoint that believed its copy synced
// would let the WAL start again over frames the database does not hold.
func TestWritebackErrorReachesSync(t *testing.T) {
	eio := syscall.EIO
	defer func(f func(int, int64, int64) error) { syncRange = f }(syncRange)
	calls := 0
	syncRange = func(int, int64, int64) error { calls++; return eio }
	inner := &recordingFile{}
	f := &writebackFile{offPFile: offPFile{File: inner, offPSync: offPSync{fd: -1}}, lo: -1} // no descriptor: the syncs are the inner file's
	page := make([]byte, 4096)
	for i := range writebackSlice / len(page) {
		if _, err := f.WriteAt(page, int64(i*len(page))); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("%d slices written back after %d KiB, want 1", calls, writebackSlice>>10)
	}
	if err := f.Sync(vfs.SYNC_NORMAL); !errors.Is(err, eio) {
		t.Fatalf("Sync after a failed slice: %v, want %v", err, eio)
	}
	syncRange = func(int, int64, int64) error { return nil }
	if err := f.Sync(vfs.SYNC_NORMAL); err != nil || inner.syncs != 1 {
		t.Fatalf("the next Sync: %v, %d syncs of the file; want nil, 1", err, inner.syncs)
	}
}

// recordingFile is a vfs.File that keeps nothing and counts its syncs.
type recordingFile struct {
	vfs.File
	syncs int
}

func (r *recordingFile) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (r *recordingFile) Sync(vfs.SyncFlag) error                { r.syncs++; return nil }

// The checkpoint's files sync through the file itself the first time (a new WAL's directory is
// synced with it), and from then on by syncData alone, whose errors reach SQLite.
func TestCheckpointFilesSyncOffThePAfterTheFirst(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "spookat.db-wal"))
	testkit.NoErr(t, err)
	inner := &recordingFile{}
	wal := &offPFile{File: inner, offPSync: offPSync{fd: int(f.Fd())}}
	for i := range 3 {
		_, err := f.WriteAt([]byte("a frame"), int64(i)*7)
		testkit.NoErr(t, err)
		testkit.NoErr(t, wal.Sync(vfs.SYNC_NORMAL))
	}
	want := 1
	if !syncOffP {
		want = 3
	}
	if inner.syncs != want {
		t.Fatalf("three syncs went through the file %d times, want %d", inner.syncs, want)
	}
	testkit.NoErr(t, f.Close())
	if err := wal.Sync(vfs.SYNC_NORMAL); syncOffP && !errors.Is(err, syscall.EBADF) {
		t.Fatalf("a sync of a closed descriptor: %v, want %v", err, syscall.EBADF)
	}
	// Until the file's own sync has once succeeded, it is the one that syncs.
	g, err := os.Create(filepath.Join(t.TempDir(), "other.db-wal"))
	testkit.NoErr(t, err)
	defer g.Close()
	failing := &offPFile{File: &failingSyncFile{}, offPSync: offPSync{fd: int(g.Fd())}}
	for i := range 2 {
		if err := failing.Sync(vfs.SYNC_NORMAL); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync %d of a file whose own sync fails: %v, want %v", i+1, err, syscall.EIO)
		}
	}
}

// failingSyncFile is a vfs.File whose syncs fail.
type failingSyncFile struct{ vfs.File }

func (failingSyncFile) Sync(vfs.SyncFlag) error { return syscall.EIO }
