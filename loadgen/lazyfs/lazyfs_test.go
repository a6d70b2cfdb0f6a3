package lazyfs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver"

	"spookat/loadgen/lazyfs"
	"spookat/schema/testkit"
)

// mount mounts a lazy view of a fresh backing folder, or skips loudly where FUSE is missing.
func mount(t *testing.T) (fs *lazyfs.FS, backing, mnt string) {
	t.Helper()
	if why := lazyfs.Available(); why != "" {
		t.Skip("SKIPPED: " + why)
	}
	backing, mnt = t.TempDir(), t.TempDir()
	fs, err := lazyfs.Mount(backing, mnt)
	testkit.NoErr(t, err)
	return fs, backing, mnt
}

// A cut leaves each file as its last fsync left it: synced bytes stay, later writes and
// growth go, a file never synced comes back empty, an overwrite of synced bytes is undone.
func TestCutDropsWhatWasNotSynced(t *testing.T) {
	fs, backing, mnt := mount(t)
	synced := bytes.Repeat([]byte("s"), 8192)

	f, err := os.Create(filepath.Join(mnt, "log"))
	testkit.NoErr(t, err)
	_, err = f.Write(synced)
	testkit.NoErr(t, err)
	testkit.NoErr(t, f.Sync())
	_, err = f.WriteAt([]byte("OVERWRITTEN"), 100) // over synced bytes
	testkit.NoErr(t, err)
	_, err = f.Write(bytes.Repeat([]byte("u"), 5000)) // growth
	testkit.NoErr(t, err)
	testkit.NoErr(t, f.Close())

	testkit.NoErr(t, os.WriteFile(filepath.Join(mnt, "key"), []byte("0123456789abcdef"), 0o600)) // never synced

	g, err := os.Create(filepath.Join(mnt, "kept"))
	testkit.NoErr(t, err)
	_, err = g.Write([]byte("durable"))
	testkit.NoErr(t, err)
	testkit.NoErr(t, g.Sync())
	testkit.NoErr(t, g.Close())

	// A file renamed over another without a sync of its own: the new name, no contents.
	testkit.NoErr(t, os.WriteFile(filepath.Join(mnt, "conf.tmp"), []byte("new settings"), 0o600))
	testkit.NoErr(t, os.Rename(filepath.Join(mnt, "conf.tmp"), filepath.Join(mnt, "conf")))

	rep, err := fs.Cut(false)
	testkit.NoErr(t, err)
	for name, want := range map[string][]byte{"log": synced, "key": {}, "kept": []byte("durable"), "conf": {}} {
		got, err := os.ReadFile(filepath.Join(backing, name))
		testkit.NoErr(t, err)
		if !bytes.Equal(got, want) {
			t.Errorf("%s after the cut: %d bytes %.20q…, want %d bytes %.20q…", name, len(got), got, len(want), want)
		}
	}
	if rep.Files != 3 || rep.Torn {
		t.Errorf("report %+v, want 3 files (log, key, conf), not torn", rep)
	}
}

// A torn cut keeps a sector-aligned part of the last write, never all of it.
func TestCutTearsTheLastWrite(t *testing.T) {
	fs, backing, mnt := mount(t)
	f, err := os.Create(filepath.Join(mnt, "wal"))
	testkit.NoErr(t, err)
	testkit.NoErr(t, f.Sync())
	_, err = f.Write(bytes.Repeat([]byte("w"), 4096))
	testkit.NoErr(t, err)
	testkit.NoErr(t, f.Close())
	rep, err := fs.Cut(true)
	testkit.NoErr(t, err)
	got, err := os.ReadFile(filepath.Join(backing, "wal"))
	testkit.NoErr(t, err)
	if !rep.Torn || len(got) == 0 || len(got) >= 4096 || len(got)%512 != 0 {
		t.Fatalf("torn cut left %d bytes (report %+v), want a whole number of sectors, some but not all", len(got), rep)
	}
}

// SQLite in WAL mode on the lazy folder, written by a child process that is then killed
// (SQLite in this process would deadlock: its page faults on the mapped -shm file wait for
// this process's FUSE server, which a stop-the-world garbage collection has stopped): with
// synchronous=FULL every commit survives a cut; with NORMAL the last ones may go, and the
// file is sound either way.
func TestSQLiteSurvivesCuts(t *testing.T) {
	for _, mode := range []string{"FULL", "NORMAL"} {
		t.Run(mode, func(t *testing.T) {
			fs, backing, mnt := mount(t)
			const commits = 200
			child := exec.Command(os.Args[0])
			child.Env = append(os.Environ(), "LAZYFS_CHILD="+filepath.Join(mnt, "t.db"), "LAZYFS_SYNC="+mode)
			out, err := child.StdoutPipe()
			testkit.NoErr(t, err)
			testkit.NoErr(t, child.Start())
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "committed" {
				child.Process.Kill()
				child.Wait()
				t.Fatalf("the child said %q (%v)", line, err)
			}
			child.Process.Kill() // the process dies with nothing checkpointed, then the power goes
			child.Wait()
			_, err = fs.Cut(true)
			testkit.NoErr(t, err)

			db, err := sqlite3.Open(filepath.Join(backing, "t.db"))
			testkit.NoErr(t, err)
			defer db.Close()
			st, _, err := db.Prepare(`PRAGMA integrity_check`)
			testkit.NoErr(t, err)
			st.Step()
			if ok := st.ColumnText(0); ok != "ok" {
				t.Fatalf("integrity_check after the cut: %s", ok)
			}
			st.Close()
			n := 0 // with NORMAL, even the table may be gone: nothing of the WAL was synced
			st, _, err = db.Prepare(`SELECT count(*) FROM m`)
			if err == nil {
				st.Step()
				n = st.ColumnInt(0)
				st.Close()
			}
			t.Logf("synchronous=%s: %d of %d commits after the cut", mode, n, commits)
			if mode == "FULL" && n != commits {
				t.Fatalf("synchronous=FULL lost commits: %d of %d", n, commits)
			}
		})
	}
}

// TestMain runs the child of TestSQLiteSurvivesCuts when asked to: 200 commits, then it
// says so and waits to be killed.
func TestMain(m *testing.M) {
	path := os.Getenv("LAZYFS_CHILD")
	if path == "" {
		os.Exit(m.Run())
	}
	fail := func(err error) {
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	db, err := sqlite3.Open(path)
	fail(err)
	fail(db.Exec(`PRAGMA journal_mode=WAL; PRAGMA synchronous=` + os.Getenv("LAZYFS_SYNC") + `;
		PRAGMA wal_autocheckpoint=0; CREATE TABLE m (id INTEGER PRIMARY KEY, v TEXT)`))
	for i := range 200 {
		fail(db.Exec(fmt.Sprintf(`INSERT INTO m (v) VALUES ('%d')`, i)))
	}
	fmt.Println("committed")
	select {}
}
