package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/util/vfsutil"
	"github.com/ncruces/go-sqlite3/vfs"

	"spookat/schema/testkit"
)

// The timer's checkpoint opens the database through the spookat-checkpoint VFS (its syncs off
// the P, offp.go) and copies everything: after a pass begun once every message was committed,
// the database file alone, without its WAL, holds them all. The directory's name needs
// escaping in the URI the checkpoint opens.
func TestCheckpointCopiesEverything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%e")
	s := openTest(t, dir, Options{CheckpointEvery: time.Hour, WALPages: -1})
	defer s.Close()
	site := addSite(t, s)
	const n = 600
	for i := range n {
		submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: fmt.Appendf(nil, "v%d", i%50), Author: "visitor",
			Text: fmt.Sprintf("message %d %s", i, strings.Repeat("x", 3000)), ClientID: fmt.Sprint(i)})
	}
	f, err := s.ckpt.FileControl("main", sqlite3.FCNTL_FILE_POINTER)
	testkit.NoErr(t, err)
	if vf, ok := f.(vfs.File); !ok {
		t.Fatalf("the checkpoint's file pointer is a %T", f)
	} else if _, ok := vfsutil.UnwrapFile[*offPFile](vf); !ok {
		t.Fatal("the checkpoint's connection did not open its database through the spookat-checkpoint VFS")
	}
	passes0 := s.wal.passes.Load()
	s.ckptKick <- struct{}{}
	testkit.WaitFor(t, "the timer's checkpoint to copy the WAL", 10*time.Second, func() bool {
		return s.wal.passes.Load() > passes0 && !s.wal.copying.Load()
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
