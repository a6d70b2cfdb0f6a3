package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// The writer's WAL frames go out in one write each, and a copy of the files taken before any
// checkpoint (what a power cut after the OS wrote them would leave) recovers every message
// from the WAL. The directory's name needs escaping in the URI the writer opens.
func TestFramesWrittenWhole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%e")
	s := openTest(t, dir, Options{CheckpointEvery: time.Hour, WALPages: -1})
	defer s.Close()
	site := addSite(t, s)
	whole0, frames0 := framesWhole.Load(), s.WALStats().Frames
	const n = 300
	for i := range n {
		submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: fmt.Appendf(nil, "v%d", i%7), Author: "visitor",
			Text: fmt.Sprintf("message %d %0300d", i, i), ClientID: fmt.Sprint(i)})
	}
	frames := s.WALStats().Frames - frames0
	if frames < n/10 {
		t.Fatalf("%d WAL frames for %d messages", frames, n)
	}
	if whole := framesWhole.Load() - whole0; whole != frames {
		t.Fatalf("%d frames appended, %d written with their header in one write", frames, whole)
	}

	cut := t.TempDir()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, FileName+suffix))
		testkit.NoErr(t, err)
		testkit.NoErr(t, os.WriteFile(filepath.Join(cut, FileName+suffix), b, 0o600))
	}
	if got := countMessages(t, filepath.Join(cut, FileName)); got != n {
		t.Fatalf("the WAL copied before a checkpoint holds %d messages, want %d", got, n)
	}
}

// countMessages opens the database file at path (with whatever WAL lies beside it) and
// counts its messages.
func countMessages(t *testing.T, path string) int {
	t.Helper()
	c, err := OpenConn(path, 0)
	testkit.NoErr(t, err)
	defer c.Close()
	st, _, err := c.Prepare(`SELECT count(*) FROM messages`)
	testkit.NoErr(t, err)
	defer st.Close()
	if !st.Step() {
		t.Fatal(st.Err())
	}
	return st.ColumnInt(0)
}
