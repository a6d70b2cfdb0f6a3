package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The data directory and the database files are private whatever the umask, including an
// install made before they were (a 0755 folder and a 0644 file).
func TestFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(c.path), fi.Mode(), c.want)
		}
	}
}
