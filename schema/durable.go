package schema

import (
	"os"
	"path/filepath"
)

// WriteSecret writes a file only its owner can read, whatever the umask, so that it survives
// a power cut whole or not at all: a temporary file, synced, renamed over the old one, then
// the folder synced (its new entry). Keys, JWTs, credentials files.
func WriteSecret(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600) // whatever the umask, and an older file's mode
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes a folder's entries (files created, renamed or removed in it) durable.
func SyncDir(dir string) error { return syncPath(dir) }

// SyncFile makes what was written to a closed file durable.
func SyncFile(name string) error { return syncPath(name) }

func syncPath(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
