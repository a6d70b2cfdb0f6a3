package store

import (
	"bufio"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
)

func TestSQLiteURI(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags sqlite3.OpenFlag
		want  string
	}{
		{"/d/spookat.db", sqlite3.OPEN_READONLY, "file:///d/spookat.db?mode=ro"},
		{"/d/spookat.db", sqlite3.OPEN_READWRITE, "file:///d/spookat.db?mode=rw"},
		{"/d/spookat.db", sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE, "file:///d/spookat.db?mode=rwc"},
		{"file:///d/spookat.db?vfs=spookat-frames", sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE | sqlite3.OPEN_URI,
			"file:///d/spookat.db?vfs=spookat-frames&mode=rwc"},
		{"file:///d/search.db", sqlite3.OPEN_READONLY, "file:///d/search.db?mode=ro"},
		{":memory:", sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE, "file::memory:"},
		// What a URI would read as its query or as a separator is escaped.
		{"/d/a b?#.db", sqlite3.OPEN_READONLY, "file:///d/a%20b%3F%23.db?mode=ro"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := sqliteURI(c.name, c.flags)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("sqliteURI(%q) = %q, want %q", c.name, got, c.want)
			}
		})
	}
}

// bigReservations counts this process's mappings that reserve at least 4 GiB and grant no
// access: a connection's reservation, before SQLite's heap commits the start of it.
func bigReservations(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text()) // "from-to perms offset dev inode [path]"
		from, to, _ := strings.Cut(fields[0], "-")
		a, err1 := strconv.ParseUint(from, 16, 64)
		b, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("cannot read %q", sc.Text())
		}
		if b-a >= sqliteReserve-(64<<20) && fields[1] == "---p" {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// Each connection reserves SQLite's whole address space (conn.go: what makes the build
// without bounds checks safe), and its heap stays under the limit all the same.
func TestConnReservesSQLitesAddressSpace(t *testing.T) {
	if !sqliteFull {
		t.Skip("a 32-bit build, or an address-space limit (ulimit -v): connections keep ncruces's reservation")
	}
	path := filepath.Join(t.TempDir(), "x.db")
	before := bigReservations(t)
	var conns []*sqlite3.Conn
	for _, flags := range []sqlite3.OpenFlag{sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE, sqlite3.OPEN_READONLY} {
		c, err := openSQLite(path, flags)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if got := bigReservations(t) - before; got != len(conns) {
		t.Fatalf("%d new reservations of 4 GiB for %d connections", got, len(conns))
	}

	t.Run("a read-only connection cannot write", func(t *testing.T) {
		if err := conns[0].Exec(`CREATE TABLE t (x)`); err != nil {
			t.Fatal(err)
		}
		err := conns[1].Exec(`INSERT INTO t VALUES (1)`)
		if !errors.Is(err, sqlite3.READONLY) {
			t.Fatalf("insert on a read-only connection: %v, want SQLITE_READONLY", err)
		}
	})
	t.Run("an allocation past the heap limit fails", func(t *testing.T) {
		// 300 MB would fit in the reservation: the limit refuses it, before anything is
		// committed, as ncruces's 256 MiB reservation did. ncruces panics on SQLITE_NOMEM.
		defer func() {
			r := recover()
			if r == nil {
				return // reported below
			}
			if err, _ := r.(error); err == nil || err.Error() != "sqlite3: out of memory" {
				t.Fatalf("a 300 MB blob: %v, want ncruces's SQLITE_NOMEM panic", r)
			}
		}()
		stmt, _, err := conns[0].Prepare(`SELECT length(randomblob(300000000))`)
		if err != nil {
			t.Fatal(err)
		}
		stmt.Step()
		t.Errorf("a 300 MB blob: no panic (%v)", stmt.Err())
	})
}

// Under an address-space limit that would not hold the reservations, connections keep
// ncruces's (a reservation's mmap failing would be ncruces's panic at open).
func TestSQLiteReservedOnlyWithRoom(t *testing.T) {
	for _, c := range []struct {
		name     string
		uintSize int
		limit    uint64
		want     bool
	}{
		{"64-bit, no limit", 64, math.MaxUint64, true},
		{"64-bit, a limit with room", 64, 512 << 30, true},
		{"64-bit, at the room", 64, sqliteRoom, true},
		{"64-bit, ulimit -v 8 GiB", 64, 8 << 30, false},
		{"32-bit", 32, math.MaxUint64, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := sqliteReserved(c.uintSize, c.limit); got != c.want {
				t.Errorf("sqliteReserved(%d, %d) = %v, want %v", c.uintSize, c.limit, got, c.want)
			}
		})
	}
}
