package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema/testkit"
)

// The data directory and the database files are private whatever the umask, including an
// install made before they were (a 0755 folder and a 0644 file).
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	testkit.NoErr(t, os.Mkdir(dir, 0o755))
	testkit.NoErr(t, os.WriteFile(filepath.Join(dir, FileName), nil, 0o644))
	s := openTest(t, dir, Options{})
	addSite(t, s)
	defer s.Close()
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{dir, 0o700 | os.ModeDir},
		{s.Path(), 0o600},
		{s.Path() + "-wal", 0o600},
		{s.Path() + "-shm", 0o600},
	} {
		fi, err := os.Stat(c.path)
		testkit.NoErr(t, err)
		if fi.Mode() != c.want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(c.path), fi.Mode(), c.want)
		}
	}
}

// Cached statements stay prepared: a statement that SQLite re-prepares on each run (the
// planner looked at its bound values) costs a parse and a plan per visitor lookup and resume.
func TestCachedStatementsAreNotReprepared(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	site := addSite(t, s)
	ctx := context.Background()
	for i := range 20 {
		token := []byte(fmt.Sprintf("%032d", i))
		r := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: token, Author: "visitor", Text: "hi", ClientID: fmt.Sprint("c", i)})
		submit(t, s, MessageRequest{SiteID: site.ID, VisitorID: r.VisitorID, ConversationID: r.ConversationID,
			Author: "visitor", Text: "again", ClientID: fmt.Sprint("d", i)})
		if _, found, err := s.VisitorByToken(ctx, site.ID, token); err != nil || !found {
			t.Fatalf("visitor %d: %v %v", i, found, err)
		}
		testkit.NoErr(t, s.MessagesAfter(ctx, r.ConversationID, int64(i%2), 10, i%3 == 0, func(*Message) error { return nil }))
	}
	check := func(who string, c *stmtCache) {
		for sql, st := range c.stmts {
			if n := st.Status(sqlite3.STMTSTATUS_REPREPARE, false); n > 0 {
				t.Errorf("%s: re-prepared %d times in %d runs: %s", who, n, st.Status(sqlite3.STMTSTATUS_RUN, false), sql)
			}
		}
	}
	for range cap(s.readers) {
		r := <-s.readers
		check("reader", &r.stmts)
		defer func() { s.readers <- r }()
	}
	if err := s.Write(ctx, func(*Tx) error { check("writer", &s.wstmts); return nil }); err != nil {
		t.Fatal(err)
	}
}
