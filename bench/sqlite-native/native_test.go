// Package sqlitenative measures the edge's write path in SQL alone, the same statements on the
// same schema, through SQLite translated to Go (ncruces, the product's driver) and through the
// C SQLite of mattn/go-sqlite3 (cgo): how much of the edge's CPU a message is SQLite's being
// translated. Not part of the product; run with GOWORK=off (see README.md).
package sqlitenative

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The columns and indexes of the edge's messages and conversations (schema/migrations).
const schemaSQL = `
CREATE TABLE conversations (id INTEGER PRIMARY KEY, site_id INTEGER NOT NULL, visitor_id INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'open', last_message_id INTEGER NOT NULL DEFAULT 0, first_unread INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, snoozed_until INTEGER NOT NULL DEFAULT 0, assignee_id INTEGER NOT NULL DEFAULT 0);
CREATE INDEX conversations_site ON conversations(site_id);
CREATE UNIQUE INDEX conversations_visitor ON conversations(visitor_id);
CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL, author TEXT NOT NULL, name TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL, source TEXT NOT NULL DEFAULT 'widget', client_id TEXT, internal INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL, file_id INTEGER, kind TEXT NOT NULL DEFAULT '');
CREATE UNIQUE INDEX messages_client ON messages(conversation_id, source, client_id);
CREATE INDEX messages_file ON messages (file_id) WHERE file_id IS NOT NULL;`

const (
	conversations = 1000
	perCommit     = 50 // the edge groups about this many at 20,000/s
)

func BenchmarkWritePath(b *testing.B) {
	// ckpt=1000 checkpoints inline every 1,000 WAL pages (fsyncs included); ckpt=0 never:
	// the statements and the WAL writes alone.
	for _, ckpt := range []int{1000, 0} {
		b.Run(fmt.Sprintf("ncruces/ckpt=%d", ckpt), func(b *testing.B) { benchWrite(b, openNcruces, ckpt, 4096) })
		b.Run(fmt.Sprintf("cgo/ckpt=%d", ckpt), func(b *testing.B) { benchWrite(b, openCgo, ckpt, 4096) })
	}
}

// BenchmarkCheckpointEvery: a checkpoint copies each page the WAL holds once, however often
// commits rewrote it; rarer checkpoints copy fewer pages a message, for a longer WAL.
func BenchmarkCheckpointEvery(b *testing.B) {
	for _, every := range []int{1000, 4000, 16000} {
		b.Run(fmt.Sprintf("ncruces/pages=%d", every), func(b *testing.B) { benchWrite(b, openNcruces, every, 4096) })
	}
}

// BenchmarkPageSize: a message's writes are scattered (one leaf of the conversation-keyed
// index each), so a page's size is bytes written, checksummed and checkpointed a message.
func BenchmarkPageSize(b *testing.B) {
	for _, size := range []int{1024, 2048, 4096, 8192} {
		b.Run(fmt.Sprintf("ncruces/page=%d", size), func(b *testing.B) { benchWrite(b, openNcruces, 1000, size) })
	}
}

// conn is the little the write path needs of a connection; each driver through its own
// lowest-level API, as the edge's store uses ncruces's.
type conn interface {
	exec(sql string) error
	prepare(sql string) (stmt, error)
	close() error
}

type stmt interface {
	exec(args ...any) error
	close() error
}

func benchWrite(b *testing.B, open func(path string) (conn, error), ckpt, pageSize int) {
	path := filepath.Join(b.TempDir(), "bench.db")
	c, err := open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	for _, q := range []string{fmt.Sprintf(`PRAGMA page_size=%d`, pageSize), `PRAGMA journal_mode=WAL`, `PRAGMA synchronous=NORMAL`, fmt.Sprintf(`PRAGMA wal_autocheckpoint=%d`, ckpt), schemaSQL} {
		if err := c.exec(q); err != nil {
			b.Fatal(q, err)
		}
	}
	conv, err := c.prepare(`INSERT INTO conversations (id, site_id, visitor_id, created_at, updated_at) VALUES (?, ?, ?, 0, 0)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := range conversations {
		if err := conv.exec(int64(i+1), int64(i%100+1), int64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	conv.close()
	ins, err := c.prepare(`INSERT INTO messages (id, conversation_id, author, name, text, source, client_id, internal, created_at, file_id, kind)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_id, source, client_id) DO NOTHING`)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.close()
	upd, err := c.prepare(`UPDATE conversations SET last_message_id = ?2, updated_at = ?3,
		first_unread = CASE WHEN first_unread = 0 THEN ?4 ELSE first_unread END WHERE id = ?1 AND status = 'open'`)
	if err != nil {
		b.Fatal(err)
	}
	defer upd.close()
	text := "Hello, I have a question about my order #12345, can you help me?"
	b.ReportAllocs()
	frames0 := walFrames(b, path, pageSize)
	cpu0, user0 := cpuTime(), userTime()
	b.ResetTimer()
	for n := 0; n < b.N; n += perCommit {
		if err := c.exec(`BEGIN IMMEDIATE`); err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixMilli()
		for k := n; k < n+perCommit && k < b.N; k++ {
			conv := int64((k*7919)%conversations + 1)
			if err := ins.exec(int64(k+1), conv, "visitor", "", text, "widget", strconv.Itoa(k), int64(0), now, nil, ""); err != nil {
				b.Fatal(err)
			}
			if err := upd.exec(conv, int64(k+1), now, int64(k+1)); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.exec(`COMMIT`); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
	b.ReportMetric(float64((userTime()-user0).Microseconds())/float64(b.N), "user-µs/msg")
	if ckpt == 0 {
		b.ReportMetric(float64(walFrames(b, path, pageSize)-frames0)/float64(b.N), "wal-pages/msg")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userTime is the process's CPU time outside the kernel: SQLite's own work, not its system calls.
func userTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano())
}

// walFrames is how many frames the WAL file holds: with no checkpoint, every page a commit wrote.
func walFrames(b *testing.B, path string, pageSize int) int64 {
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		b.Fatal(err)
	}
	return (fi.Size() - 32) / int64(24+pageSize)
}
