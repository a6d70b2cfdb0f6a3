package store

import (
	"context"
	"fmt"
	"math/bits"
	"strings"
	"sync"

	"github.com/ncruces/go-sqlite3"
)

// Each connection runs its own instance of the translated SQLite, whose memory is one Go
// byte slice inside an address range reserved up front. ncruces reserves 256 MiB; the edge
// reserves the whole 32-bit address space (4 GiB, address space only: pages are committed as
// SQLite's heap grows). Then every pointer the translated code can form lands inside its own
// reservation, and one past SQLite's heap faults on a page that is not mapped instead of
// reaching Go's memory. That is what lets `make build` compile the translated SQLite without
// bounds checks (README "Building"): a wild pointer in SQLite stops the edge where a bounds
// check would have panicked. Only a wild pointer near the top plus a field's constant offset (at
// most 165 KiB in this translation) can reach past the reservation.
const sqliteReserve = 1 << 32

// sqliteHeapLimit keeps each connection's heap where ncruces's reservation kept it: an
// allocation past it is SQLITE_NOMEM, which ncruces turns into a panic, as it did at the end
// of its own reservation.
const sqliteHeapLimit = 256 << 20

// sqliteRoom is the address space the reservations need for the edge's connections (the
// writer, the checkpointer, the readers, the indexer's two, a backup's) with room to spare.
const sqliteRoom = 256 << 30

// sqliteReserved reports whether connections get the full reservation: not on a 32-bit
// build, and not under an address-space limit (ulimit -v, systemd's LimitAS=) that leaves
// less than sqliteRoom, where a reservation's mmap would fail and ncruces panic at open.
// Then they keep ncruces's 256 MiB, and the store says so once in its log.
func sqliteReserved(uintSize int, asLimit uint64) bool {
	return uintSize >= 64 && asLimit >= sqliteRoom
}

var (
	sqliteASLimit = addressSpaceLimit()
	sqliteFull    = sqliteReserved(bits.UintSize, sqliteASLimit)
	sqliteWarned  sync.Once // the log's word when !sqliteFull, once a process
)

var sqliteMemory = func() context.Context {
	if !sqliteFull {
		return context.Background()
	}
	return sqlite3.WithMaxMemory(context.Background(), sqliteReserve)
}()

// openSQLite opens a connection of the edge's to name (a path, or a "file:" URI whose query
// keeps its parameters) as flags say (OPEN_READONLY, OPEN_READWRITE, OPEN_CREATE), in its
// full reservation and under the heap limit.
func openSQLite(name string, flags sqlite3.OpenFlag) (*sqlite3.Conn, error) {
	uri, err := sqliteURI(name, flags)
	if err != nil {
		return nil, err
	}
	c, err := sqlite3.OpenContext(sqliteMemory, uri)
	if err != nil {
		return nil, err
	}
	if err := c.Exec(fmt.Sprintf(`PRAGMA hard_heap_limit=%d`, sqliteHeapLimit)); err != nil {
		c.Close()
		return nil, fmt.Errorf("limit SQLite's heap: %w", err)
	}
	return c, nil
}

// sqliteURI is name as a URI whose mode says what flags said: OpenContext, the one way to
// give a connection its memory, opens for reading and writing unless the URI says otherwise.
func sqliteURI(name string, flags sqlite3.OpenFlag) (string, error) {
	mode := "rw"
	switch {
	case flags&sqlite3.OPEN_READONLY != 0:
		mode = "ro"
	case flags&sqlite3.OPEN_CREATE != 0:
		mode = "rwc"
	}
	if name == ":memory:" {
		return "file::memory:", nil
	}
	if strings.HasPrefix(name, "file:") {
		sep := "?"
		if strings.Contains(name, "?") {
			sep = "&"
		}
		return name + sep + "mode=" + mode, nil
	}
	return fileURI(name, "mode="+mode)
}
