// Package backup copies a data directory into one archive while the edge serves, and makes a
// data directory from such an archive.
//
// An archive is a gzip'd tar of: spookat.db (a consistent copy made
// by VACUUM INTO on a read connection: a snapshot of one moment, so a message is in it whole
// or not at all, and the writer never waits for it), files.key, nats-auth/ (the NATS
// authority: workers' credentials keep working) and files/ (attachments, copied after the
// snapshot: a file uploaded since is in the archive without a row, harmless), then
// BACKUP.json (Manifest, last: it counts the files). JetStream's
// store is not in it: a restored edge provisions empty streams and replays the jobs of the
// last day's messages whose deliveries the copy does not record as done (Restore).
//
// A migration takes a copy of the database alone first (PreMigration): a migration changes
// nothing else.
package backup

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/files"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
)

// Format is the archive layout's version, in its manifest.
const Format = 1

// ManifestName is the archive's first entry.
const ManifestName = "BACKUP.json"

// Manifest says what an archive holds.
type Manifest struct {
	Format        int       `json:"format"`
	CreatedAt     time.Time `json:"created_at"`     // the snapshot's moment (just before it)
	SchemaVersion int       `json:"schema_version"` // the database's migration version
	Messages      int64     `json:"messages"`
	LastMessageID int64     `json:"last_message_id"`
	Files         int       `json:"files"` // attachment files
	DBSHA256      string    `json:"db_sha256"`
}

// DefaultReplay is how far before the database's last message a restored edge re-publishes the jobs of messages
// whose deliveries the copy does not record as done (restore's -replay): a worker's retries of
// a job end within a day, so an older delivery still pending at the backup is one whose
// workers were away that long.
const DefaultReplay = 24 * time.Hour

// Snapshot writes a consistent copy of the database in dir to dst (which must not exist), from
// a read connection of its own: the edge keeps writing meanwhile.
func Snapshot(dir, dst string) error {
	c, err := store.OpenConn(filepath.Join(dir, store.FileName), sqlite3.OPEN_READONLY)
	if err != nil {
		return fmt.Errorf("open the database: %w", err)
	}
	defer c.Close()
	if err := c.BusyTimeout(5 * time.Second); err != nil {
		return err
	}
	if err := store.VacuumInto(c, dst); err != nil {
		return fmt.Errorf("copy the database: %w", err)
	}
	return nil
}

// Create writes the archive of the data directory dir to out (0600: it holds every secret),
// through a temporary name, synced, so a crash leaves no half archive under out.
func Create(ctx context.Context, dir, out string) (Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); err != nil {
		return Manifest{}, fmt.Errorf("-data %s holds no spookat database", dir)
	}
	work, err := os.MkdirTemp(filepath.Dir(out), ".backup-")
	if err != nil {
		return Manifest{}, fmt.Errorf("a work folder beside %s: %w", out, err)
	}
	defer os.RemoveAll(work)
	m := Manifest{Format: Format, CreatedAt: time.Now().UTC()}
	db := filepath.Join(work, store.FileName)
	if err := Snapshot(dir, db); err != nil {
		return m, err
	}
	if err := describe(db, &m); err != nil {
		return m, err
	}

	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return m, err
	}
	defer os.Remove(tmp) // after the rename: nothing
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = func() error {
		if err := addFile(tw, db, store.FileName); err != nil {
			return err
		}
		if err := addFile(tw, filepath.Join(dir, files.KeyFile), files.KeyFile); err != nil {
			return err
		}
		if _, err := addTree(ctx, tw, dir, natsauth.DirName); err != nil {
			return err
		}
		n, err := addTree(ctx, tw, dir, "files")
		if err != nil {
			return err
		}
		m.Files = n
		// Last: it counts the files.
		body, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		return addBytes(tw, ManifestName, body)
	}()
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return m, fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return m, err
	}
	return m, schema.SyncDir(filepath.Dir(out))
}

// describe fills the manifest from the copy.
func describe(db string, m *Manifest) error {
	sum, err := fileSHA256(db)
	if err != nil {
		return err
	}
	m.DBSHA256 = sum
	c, err := store.OpenConn(db, sqlite3.OPEN_READONLY)
	if err != nil {
		return err
	}
	defer c.Close()
	st, _, err := c.Prepare(`SELECT (SELECT count(*) FROM messages), (SELECT coalesce(max(id), 0) FROM messages), (SELECT user_version FROM pragma_user_version)`)
	if err != nil {
		return err
	}
	defer st.Close()
	if !st.Step() {
		return st.Err()
	}
	m.Messages, m.LastMessageID, m.SchemaVersion = st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnInt(2)
	return st.Err()
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func addBytes(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}

func addFile(tw *tar.Writer, src, name string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: st.Size(), ModTime: st.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	// A file that grows while it is read (none should: the edge writes these whole) is cut at
	// its size in the header.
	_, err = io.CopyN(tw, f, st.Size())
	return err
}

// addTree adds the regular files under dir/sub (sub/... in the archive), skipping temporary
// files a write in progress leaves; it returns how many it added. A missing sub adds nothing.
func addTree(ctx context.Context, tw *tar.Writer, dir, sub string) (int, error) {
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (an unsent upload's cleanup)
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), ".tmp") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if err := addFile(tw, p, filepath.ToSlash(rel)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		n++
		return nil
	})
	return n, err
}

// RestoreOptions shape a restore.
type RestoreOptions struct {
	// Force moves a database already in the directory, and its companions, aside into
	// dir/replaced-<time>/ first; without it such a directory is refused.
	Force bool
	// Replay is how long before the database's last message the restored edge re-publishes
	// the jobs of messages whose deliveries it does not record as done (0: DefaultReplay).
	Replay time.Duration
	// DB, if set, is the database to restore instead of the archive's: a newer copy, such as
	// `litestream restore` makes. The archive then gives the keys and the attachments.
	DB string
}

// Restore makes the data directory dir from the archive from. It refuses a directory an edge
// runs on, and one that already holds a database unless o.Force. The database is checked (the
// archive's against its checksum, and integrity_check) before anything is moved.
//
// The jobs of the messages of the last o.Replay before the database's last message are
// published again by the restored edge (see rewind).
func Restore(from, dir string, o RestoreOptions) (Manifest, error) {
	force, replay := o.Force, cmp.Or(o.Replay, DefaultReplay)
	lock, free, err := admin.Lock(dir)
	if err != nil {
		return Manifest{}, err
	}
	if !free {
		return Manifest{}, fmt.Errorf("an edge is running on %s: stop it first (restore never writes under a running edge)", dir)
	}
	defer lock.Close()
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); err == nil && !force {
		return Manifest{}, fmt.Errorf("%s already holds a database; restore into an empty directory, or add -force to move what is there into %s/replaced-<time>/", dir, dir)
	}

	// Unpack into a folder of dir first: nothing of dir changes until the copy checks out.
	stage, err := os.MkdirTemp(dir, ".restore-")
	if err != nil {
		return Manifest{}, err
	}
	defer os.RemoveAll(stage)
	m, err := unpack(from, stage)
	if err != nil {
		return m, fmt.Errorf("%s: %w", from, err)
	}
	if err := check(stage, m); err != nil {
		return m, fmt.Errorf("%s: %w", from, err)
	}
	if o.DB != "" {
		// The newer database replaces the archive's, checked the same way but for the sum.
		db := filepath.Join(stage, store.FileName)
		if err := os.Remove(db); err != nil {
			return m, err
		}
		if err := copyFile(o.DB, db); err != nil {
			return m, fmt.Errorf("-db %s: %w", o.DB, err)
		}
		if err := integrity(db); err != nil {
			return m, fmt.Errorf("-db %s: %w", o.DB, err)
		}
		if err := describe(db, &m); err != nil {
			return m, fmt.Errorf("-db %s: %w", o.DB, err)
		}
	}
	if err := rewind(filepath.Join(stage, store.FileName), replay); err != nil {
		return m, err
	}

	names := []string{store.FileName, store.FileName + "-wal", store.FileName + "-shm", store.SearchFileName, store.SearchFileName + "-wal", store.SearchFileName + "-shm", files.KeyFile, natsauth.DirName, "files", "nats"}
	if force {
		aside := filepath.Join(dir, "replaced-"+time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Mkdir(aside, 0o700); err != nil {
			return m, err
		}
		for _, n := range names {
			if err := os.Rename(filepath.Join(dir, n), filepath.Join(aside, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return m, fmt.Errorf("move %s aside: %w", n, err)
			}
		}
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(stage, n), filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return m, fmt.Errorf("put %s in place: %w", n, err)
		}
	}
	return m, schema.SyncDir(dir)
}

// maxEntry bounds one archive entry (the database included): a damaged or hostile header
// cannot fill the disk.
const maxEntry = 1 << 40

// unpack reads the archive into dir, refusing any name that would leave it, links and devices.
func unpack(from, dir string) (Manifest, error) {
	var m Manifest
	f, err := os.Open(from)
	if err != nil {
		return m, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return m, fmt.Errorf("not a spookat backup (gzip: %w)", err)
	}
	tr := tar.NewReader(zr)
	seen := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return m, fmt.Errorf("damaged archive: %w", err)
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || !fs.ValidPath(name) || name == "." || h.Size < 0 || h.Size > maxEntry {
			return m, fmt.Errorf("entry %q is not a file a spookat backup holds", h.Name)
		}
		if name == ManifestName {
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
				return m, fmt.Errorf("%s: %w", ManifestName, err)
			}
			seen = true
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return m, err
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return m, err
		}
		_, err = io.CopyN(out, tr, h.Size)
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return m, err
		}
	}
	if !seen {
		return m, fmt.Errorf("no %s: not a spookat backup", ManifestName)
	}
	if m.Format != Format {
		return m, fmt.Errorf("backup format %d; this edge reads format %d", m.Format, Format)
	}
	return m, nil
}

// check compares the unpacked database with the manifest and SQLite's integrity check.
func check(dir string, m Manifest) error {
	db := filepath.Join(dir, store.FileName)
	sum, err := fileSHA256(db)
	if err != nil {
		return fmt.Errorf("no database in the archive: %w", err)
	}
	if sum != m.DBSHA256 {
		return errors.New("the database's checksum differs from the manifest's: the archive is damaged")
	}
	if _, err := os.Stat(filepath.Join(dir, files.KeyFile)); err != nil {
		return fmt.Errorf("no %s in the archive", files.KeyFile)
	}
	return integrity(db)
}

// integrity runs SQLite's integrity_check on db.
func integrity(db string) error {
	c, err := store.OpenConn(db, sqlite3.OPEN_READONLY)
	if err != nil {
		return err
	}
	defer c.Close()
	st, _, err := c.Prepare(`PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Step() && st.ColumnText(0) != "ok" {
		return fmt.Errorf("integrity_check: %s", st.ColumnText(0))
	}
	return st.Err()
}

// rewind sets the copy's outbox watermark back to the last message older than replay before
// its newest: JetStream's store is not in the archive, so the restored edge re-publishes the
// jobs of the messages after it, except to the targets their deliveries are recorded done for
// (the replay's rule); those jobs carry the possible-repeat mark. The copy of a running edge
// says it is running: the restored edge, on a new JetStream, has no unclean start to tell.
func rewind(db string, replay time.Duration) error {
	c, err := store.OpenConn(db, sqlite3.OPEN_READWRITE)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Exec(fmt.Sprintf(`BEGIN;
		UPDATE outbox SET published_through = min(published_through, coalesce((SELECT max(id) FROM messages
			WHERE created_at < (SELECT max(created_at) FROM messages) - %d), 0)) WHERE id = 1;
		DELETE FROM outbox_cuts;
		UPDATE id_limits SET running = 0;
		COMMIT`, replay.Milliseconds()))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
