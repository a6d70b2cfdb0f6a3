package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/backup"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// Backups taken while visitors write hold every message acked before their moment, whole, and
// none of what was half written; a restored edge serves the same conversations, attachments,
// logins and visitors.
func TestBackupWhileServingThenRestore(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "kept", Origins: []string{"http://site.test"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@kept.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	first := edgetest.Dial(t, e.Addr, site.Key, "")
	up := upload(t, e.Addr, site.Key, "http://site.test", first.Hello.Visitor, "shot.png", "image/png", onePixelPNG)
	first.Send(t, map[string]string{"type": "message", "client_id": "f-1", "text": "with a picture", "file": up.file.ID})
	if ack := first.Read(t); ack.Type != "ack" {
		t.Fatalf("ack = %+v", ack)
	}

	// Visitors write while three backups are taken.
	var (
		mu    sync.Mutex
		acked = map[int64]string{} // message id → text
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for v := range 4 {
		c := edgetest.Dial(t, e.Addr, site.Key, "")
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				text := fmt.Sprintf("v%d-%d", v, i)
				ack, err := c.SendAck(text, text)
				if err != nil {
					t.Errorf("%s: %v", text, err)
					return
				}
				mu.Lock()
				acked[ack.MessageID] = text
				mu.Unlock()
			}
		})
	}
	testkit.WaitFor(t, "some load", 10e9, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) > 200 })
	dir := t.TempDir()
	var archives []string
	var manifests []backup.Manifest
	for k := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("b%d.tar.gz", k))
		m, err := backup.Create(context.Background(), e.DataDir, out)
		testkit.NoErr(t, err)
		archives, manifests = append(archives, out), append(manifests, m)
		t.Logf("backup %d: %+v", k, m)
		if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("archive %s: %v %v (it holds every secret: 0600)", out, st.Mode(), err)
		}
	}
	stop.Store(true)
	wg.Wait()

	for k, archive := range archives {
		m := manifests[k]
		restored := t.TempDir()
		got, err := backup.Restore(archive, restored, backup.RestoreOptions{})
		testkit.NoErr(t, err)
		if got != m || m.Files != 1 {
			t.Fatalf("manifest read back %+v, written %+v", got, m)
		}
		db := edgetest.OpenDB(t, restored)
		if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages`); n != m.Messages {
			t.Errorf("backup %d: %d messages, manifest says %d", k, n, m.Messages)
		}
		// A snapshot is a prefix of the commits: every message acked with an id up to its last
		// is there with its text, and each conversation's last message is there too.
		mu.Lock()
		missing := 0
		for id, text := range acked {
			if id <= m.LastMessageID && edgetest.QueryText(t, db, fmt.Sprintf(`SELECT coalesce((SELECT text FROM messages WHERE id = %d), '')`, id)) != text {
				missing++
			}
		}
		mu.Unlock()
		if missing > 0 {
			t.Errorf("backup %d (last id %d): %d acked messages missing or different", k, m.LastMessageID, missing)
		}
		if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations c WHERE c.last_message_id NOT IN (SELECT id FROM messages)`); n != 0 {
			t.Errorf("backup %d: %d conversations point at a message it does not hold", k, n)
		}
		db.Close()
	}

	t.Run("restore refuses a running edge's directory and a database already there", func(t *testing.T) {
		_, err := backup.Restore(archives[0], e.DataDir, backup.RestoreOptions{Force: true})
		if err == nil || !strings.Contains(err.Error(), "an edge is running") {
			t.Fatalf("over a running edge: %v", err)
		}
		used := t.TempDir()
		_, err = backup.Restore(archives[0], used, backup.RestoreOptions{})
		testkit.NoErr(t, err)
		_, err = backup.Restore(archives[1], used, backup.RestoreOptions{})
		if err == nil || !strings.Contains(err.Error(), "-force") {
			t.Fatalf("over a database: %v", err)
		}
		_, err = backup.Restore(archives[1], used, backup.RestoreOptions{Force: true})
		testkit.NoErr(t, err)
		aside, _ := filepath.Glob(filepath.Join(used, "replaced-*", store.FileName))
		if len(aside) != 1 {
			t.Fatalf("the replaced database was not kept: %v", aside)
		}
	})
	t.Run("a damaged archive is refused before anything moves", func(t *testing.T) {
		b, err := os.ReadFile(archives[0])
		testkit.NoErr(t, err)
		b[len(b)/2] ^= 0xff
		bad := filepath.Join(dir, "bad.tar.gz")
		testkit.NoErr(t, os.WriteFile(bad, b, 0o600))
		target := t.TempDir()
		if _, err := backup.Restore(bad, target, backup.RestoreOptions{}); err == nil {
			t.Fatal("a damaged archive restored")
		}
		if _, err := os.Stat(filepath.Join(target, store.FileName)); err == nil {
			t.Fatal("a damaged archive left a database")
		}
	})

	// The last backup, restored, serves: the first visitor's conversation with its picture,
	// the operator's login.
	e.Stop(t)
	restored := t.TempDir()
	_, err := backup.Restore(archives[2], restored, backup.RestoreOptions{})
	testkit.NoErr(t, err)
	db := edgetest.OpenDB(t, restored)
	if n := edgetest.QueryInt(t, db, `SELECT running FROM id_limits`); n != 0 {
		t.Errorf("the restored copy says its edge is running (%d): its first start would tell workers of an unclean stop", n)
	}
	db.Close()
	r := edgetest.Start(t, restored, server.Config{})
	back := edgetest.Dial(t, r.Addr, site.Key, first.Hello.Visitor)
	if back.Hello.Visitor != first.Hello.Visitor {
		t.Fatalf("the visitor is not known to the restored edge: %+v", back.Hello)
	}
	back.Send(t, map[string]any{"type": "resume", "after_message_id": 0})
	m := back.Read(t)
	if m.Type != "message" || m.Text != "with a picture" || m.File == nil {
		t.Fatalf("history: %+v", m)
	}
	res, b := get(t, "http://"+r.Addr+m.File.URL)
	if res.StatusCode != 200 || !bytes.Equal(b, onePixelPNG) {
		t.Fatalf("the attachment after restore: %d", res.StatusCode)
	}
	edgetest.Login(t, r.Addr, "ann@kept.test", "correct horse battery")
}
