package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one versioned SQL script. The edge applies them in order inside a transaction
// and records the version in PRAGMA user_version, so applying them again is a no-op.
// The schema package holds only the text: it must not depend on a SQLite driver, because the
// worker imports it and the worker never opens the database.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns every migration, lowest version first.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must start with a version number and '_'", name)
		}
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: expected version %d", m.Name, i+1)
		}
	}
	return out, nil
}
