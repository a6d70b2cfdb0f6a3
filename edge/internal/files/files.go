// Package files keeps the attachments of messages: the bytes on disk under the data
// directory (written by the upload handler, never by the SQLite writer's goroutine), their
// type sniffed from the content, signed expiring links for the places that have no login
// (Slack, Discord, webhooks, email), and one way to serve them that never lets a file run.
// Which message a file belongs to, and so who may read it, is in SQLite (store.File).
package files

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"spookat/schema"
)

// Dir is the folder of the attachments: <data>/files/<first two characters of the key>/<key>.
type Dir struct{ Root string }

// NewKey returns a random file key (128 bits, base64url): it names the file on disk and in
// URLs, and cannot be guessed.
func NewKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidKey reports whether k has the shape of a key NewKey makes (so that a key taken from a
// URL is never a path).
func ValidKey(k string) bool {
	if len(k) != 22 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (d Dir) path(key string) string { return filepath.Join(d.Root, key[:2], key) }

// Put writes data as the file key, durably (schema.WriteSecret: a temporary name, synced,
// renamed, the folder synced; only the edge's user reads it), and returns its SHA-256. A crash leaves either no file or the whole one.
func (d Dir) Put(key string, data []byte) ([]byte, error) {
	if !ValidKey(key) {
		return nil, errors.New("files: not a file key")
	}
	dir := filepath.Dir(d.path(key))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := schema.WriteSecret(d.path(key), data); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return sum[:], nil
}

// Open opens the file key for reading.
func (d Dir) Open(key string) (*os.File, error) {
	if !ValidKey(key) {
		return nil, os.ErrNotExist
	}
	return os.Open(d.path(key))
}

// Remove deletes the file key (an upload whose row could not be written).
func (d Dir) Remove(key string) error {
	if !ValidKey(key) {
		return nil
	}
	err := os.Remove(d.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Free is the space left on the disk that holds the files, in bytes (for an unprivileged
// user: what a write may still take).
func (d Dir) Free() (int64, error) {
	path := d.Root
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(path, &st)
		if err == nil {
			return int64(st.Bavail) * st.Bsize, nil
		}
		if parent := filepath.Dir(path); parent != path && errors.Is(err, syscall.ENOENT) {
			path = parent // not made yet: the disk it will be made on
			continue
		}
		return 0, err
	}
}
