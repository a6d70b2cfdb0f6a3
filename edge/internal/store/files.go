package store

import (
	"context"
	"time"

	"spookat/schema"
)

// File is an attachment's row: who uploaded it and, once a message carries it, where it
// belongs (which decides who may read it).
type File struct {
	ID        int64
	Key       string
	SiteID    int64
	TokenHash []byte // the uploading visitor's token hash
	Name      string
	Type      string
	Size      int64
	SHA256    []byte
	CreatedAt int64 // Unix ms
	// MessageID and ConversationID are those of the first message that carries the file
	// (0: uploaded, not sent).
	MessageID      int64
	ConversationID int64
}

// Wire is the file as frames, the API and jobs carry it.
func (f *File) Wire() *schema.File {
	return &schema.File{ID: f.Key, Name: f.Name, Type: f.Type, Size: f.Size}
}

// InsertFile names an uploaded file, inside a Write.
func (tx *Tx) InsertFile(f *File) error {
	if err := tx.exec(`INSERT INTO files (key, site_id, token_hash, name, type, size, sha256, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, f.Key, f.SiteID, f.TokenHash, f.Name, f.Type, f.Size, f.SHA256, tx.now); err != nil {
		return err
	}
	f.ID, f.CreatedAt = tx.c.LastInsertRowID(), tx.now
	return nil
}

// FileByKey reads a file's row and the message that carries it.
func (s *Store) FileByKey(ctx context.Context, key string) (f File, found bool, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT f.id, f.key, f.site_id, f.token_hash, f.name, f.type, f.size, f.sha256, f.created_at,
				coalesce(m.id, 0), coalesce(m.conversation_id, 0)
			FROM files f LEFT JOIN messages m ON m.id = (SELECT min(id) FROM messages WHERE file_id = f.id)
			WHERE f.key = ?`)
		if err != nil {
			return err
		}
		found, err = queryRow(st, []any{key}, &f.ID, &f.Key, &f.SiteID, &f.TokenHash, &f.Name, &f.Type, &f.Size,
			&f.SHA256, &f.CreatedAt, &f.MessageID, &f.ConversationID)
		return err
	})
	return f, found, err
}

// UnsentFileTTL is how long an upload no message carries is kept (and counted in its site's
// quota): a visitor sends the file with a message at once; one never sent is expired.
const UnsentFileTTL = time.Hour

// SiteFileBytes is the size of the attachments a site holds, for its quota: every file a
// message carries, and the uploads made since `since` that none carries yet.
func (s *Store) SiteFileBytes(ctx context.Context, siteID int64, since time.Time) (n int64, err error) {
	err = s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(`SELECT coalesce(sum(size), 0) FROM files f
			WHERE f.site_id = ? AND (f.created_at >= ? OR EXISTS (SELECT 1 FROM messages m WHERE m.file_id = f.id))`)
		if err != nil {
			return err
		}
		_, err = queryRow(st, []any{siteID, since.UnixMilli()}, &n)
		return err
	})
	return n, err
}

// ExpireUnsentFiles deletes up to limit uploads made before `before` that no message
// carries, and returns their keys: the caller removes the files from disk (a row without
// its file is never served; a file without its row is never reached).
func (s *Store) ExpireUnsentFiles(ctx context.Context, before time.Time, limit int) (keys []string, err error) {
	type unsent struct {
		id  int64
		key string
	}
	list, err := readList(ctx, s, `SELECT f.id, f.key FROM files f WHERE f.created_at < ?
			AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.file_id = f.id) ORDER BY f.created_at LIMIT ?`,
		[]any{before.UnixMilli(), limit}, func(u *unsent) []any { return []any{&u.id, &u.key} })
	if err != nil || len(list) == 0 {
		return nil, err
	}
	err = s.Write(ctx, func(tx *Tx) error {
		keys = keys[:0]
		for _, u := range list {
			// A message that took the file since it was read keeps it.
			if err := tx.exec(`DELETE FROM files WHERE id = ? AND NOT EXISTS (SELECT 1 FROM messages WHERE file_id = ?)`, u.id, u.id); err != nil {
				return err
			}
			if tx.c.Changes() > 0 {
				keys = append(keys, u.key)
			}
		}
		return nil
	})
	return keys, err
}
