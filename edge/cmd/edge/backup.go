package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/backup"
	"spookat/edge/internal/store"
)

// absPath names a file in the audit log as the SRE would find it again.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// backupCmd writes one archive of a data directory, whether an edge serves from it or not.
func backupCmd(args []string) error {
	fs := flag.NewFlagSet("edge backup", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory to copy (an edge may be serving from it)")
	out := fs.String("out", "", "archive to write (.tar.gz; it holds every secret: keep it as you keep the data directory)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-out is required: the archive to write, e.g. -out /backup/spookat-$(date +%F).tar.gz")
	}
	if err := needData(*dataDir); err != nil {
		return err
	}
	start := time.Now()
	m, err := backup.Create(context.Background(), *dataDir, *out)
	if err != nil {
		return err
	}
	st, _ := os.Stat(*out)
	var size int64
	if st != nil {
		size = st.Size()
	}
	err = withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		return api.Audit(ctx, store.AuditEntry{Action: store.AuditBackup, Detail: map[string]any{
			"file": absPath(*out), "messages": m.Messages, "last_message_id": m.LastMessageID, "files": m.Files}})
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "the backup is written, but not recorded in the audit log: %v\n", err)
	}
	fmt.Fprintf(stdout, "backup %s: %d messages (last id %d), %d attachment files, schema %d, %d bytes, taken %s in %s\n",
		*out, m.Messages, m.LastMessageID, m.Files, m.SchemaVersion, size, m.CreatedAt.Format(time.RFC3339), time.Since(start).Round(time.Millisecond))
	return nil
}

// restoreCmd makes a data directory from an archive.
func restoreCmd(args []string) error {
	fs := flag.NewFlagSet("edge restore", flag.ContinueOnError)
	from := fs.String("from", "", "archive written by 'edge backup'")
	dataDir := fs.String("data", "", "data directory to make (no edge may be running on it)")
	force := fs.Bool("force", false, "the directory holds a database already: move it aside into <data>/replaced-<time>/ and restore")
	replay := fs.Duration("replay", backup.DefaultReplay, "re-publish the jobs of the messages of this long before the last one whose deliveries the copy does not record as done")
	db := fs.String("db", "", "restore this database instead of the archive's (a newer copy, e.g. from 'litestream restore'); the archive gives the keys and attachments")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *from == "" || *dataDir == "" {
		return errors.New("-from and -data are required: edge restore -from /backup/spookat.tar.gz -data /var/lib/spookat/data")
	}
	m, err := backup.Restore(*from, *dataDir, backup.RestoreOptions{Force: *force, Replay: *replay, DB: *db})
	if err != nil {
		return err
	}
	// The restored log says so: its next reader learns where the data came from.
	d := map[string]any{"file": absPath(*from), "taken_at": m.CreatedAt.UTC().Format(time.RFC3339), "messages": m.Messages}
	if *db != "" {
		d["db"] = absPath(*db)
	}
	err = withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		return api.Audit(ctx, store.AuditEntry{Action: store.AuditRestore, Detail: d})
	})
	if err != nil {
		return fmt.Errorf("restored into %s, but the restore is not recorded in its audit log: %w", *dataDir, err)
	}
	what := "taken " + m.CreatedAt.Format(time.RFC3339)
	if *db != "" {
		what = "the database from " + *db
	}
	fmt.Fprintf(stdout, "restored %s into %s: %d messages (last id %d), %d attachment files, %s; start the edge with -data %s\n",
		*from, *dataDir, m.Messages, m.LastMessageID, m.Files, what, *dataDir)
	return nil
}
