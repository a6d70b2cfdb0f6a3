package store

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// The timer's checkpoint writes what it copies a slice at a time (writeback.go) and still
// copies everything: after a pass begun once every message was committed, the database file
// alone, without its WAL, holds them all. The directory's name needs escaping in the URI the checkpoint opens.
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

	cut := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	testkit.NoErr(t, err)
	testkit.NoErr(t, os.WriteFile(filepath.Join(cut, FileName), b, 0o600))
	if got := countMessages(t, filepath.Join(cut, FileName)); got != n {
		t.Fatalf("the database file after the checkpoint holds %d messages, want %d", got, n)
	}
}
