package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// The writer's WAL frames go out a commit in one write, and a copy of the files taken before any
// checkpoint (what a power cut after the OS wrote them would leave) recovers every message
// from the WAL. The directory's name needs escaping in the URI the writer opens.
func TestFramesWrittenWhole(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%e")
	s := openTest(t, dir, Options{CheckpointEvery: time.Hour, WALPages: -1})
	defer s.Close()
	site := addSite(t, s)
	whole0, writes0, frames0 := framesWhole.Load(), frameWrites.Load(), s.WALStats().Frames
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
	// Each message is a commit of its own (submit waits for its ack): its frames go out in one
	// write, and the search index's commits add a few.
	t.Logf("%d frames in %d writes for %d commits", frames, frameWrites.Load()-writes0, n)
	if writes := frameWrites.Load() - writes0; writes > n+5 || writes*2 > frames {
		t.Fatalf("%d frames of %d commits went out in %d writes, want one a commit", frames, n, writes)
	}

	cut := copyFiles(t, dir)
	if got := countRows(t, filepath.Join(cut, FileName), "messages"); got != n {
		t.Fatalf("the WAL copied before a checkpoint holds %d messages, want %d", got, n)
	}
}

// A commit larger than gatherMax goes out in pieces, every frame whole, and a copy of the
// files taken before any checkpoint holds it all; a reader sees it once committed.
func TestLargeCommitGatheredInPieces(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{CheckpointEvery: time.Hour, WALPages: -1})
	defer s.Close()
	whole0, writes0, frames0 := framesWhole.Load(), frameWrites.Load(), s.WALStats().Frames
	const rows = 1000 // 4 MB of pages, sixteen times gatherMax
	err := s.Write(t.Context(), func(tx *Tx) error {
		if err := tx.Exec(`CREATE TABLE big (b BLOB)`); err != nil {
			return err
		}
		return tx.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
			INSERT INTO big SELECT randomblob(3900) FROM n`, rows)
	})
	testkit.NoErr(t, err)
	frames, writes := s.WALStats().Frames-frames0, frameWrites.Load()-writes0
	t.Logf("%d frames in %d writes", frames, writes)
	if whole := framesWhole.Load() - whole0; whole != frames {
		t.Fatalf("%d frames appended, %d written whole", frames, whole)
	}
	if min := frames * (4096 + frameHeader) / gatherMax; writes < min || writes > 2*min+2 {
		t.Fatalf("%d frames in %d writes, want about %d (gatherMax a write)", frames, writes, min)
	}
	if n := countRows(t, filepath.Join(dir, FileName), "big"); n != rows {
		t.Fatalf("a reader sees %d rows, want %d", n, rows)
	}
	cut := copyFiles(t, dir)
	if n := countRows(t, filepath.Join(cut, FileName), "big"); n != rows {
		t.Fatalf("the copied WAL holds %d rows, want %d", n, rows)
	}
}

// copyFiles copies the database and its WAL as they are (what a power cut after the OS wrote
// them would leave) into a new directory, and returns it.
func copyFiles(t *testing.T, dir string) string {
	t.Helper()
	cut := t.TempDir()
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, FileName+suffix))
		testkit.NoErr(t, err)
		testkit.NoErr(t, os.WriteFile(filepath.Join(cut, FileName+suffix), b, 0o600))
	}
	return cut
}

// countRows opens the database file at path (with whatever WAL lies beside it) and counts
// the rows of table.
func countRows(t *testing.T, path, table string) int {
	t.Helper()
	c, err := OpenConn(path, 0)
	testkit.NoErr(t, err)
	defer c.Close()
	st, _, err := c.Prepare(`SELECT count(*) FROM ` + table)
	testkit.NoErr(t, err)
	defer st.Close()
	if !st.Step() {
		t.Fatal(st.Err())
	}
	return st.ColumnInt(0)
}
