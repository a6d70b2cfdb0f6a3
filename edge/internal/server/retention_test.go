package server_test

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// A site's retention, set in its settings, is applied by the running edge: once its clock is
// past the days, the idle conversation is gone from the database and its attachment from
// the disk, and its visitor's token is a stranger's; another site's conversation stays.
func TestRetentionThroughTheEdge(t *testing.T) {
	var skew atomic.Int64
	e := edgetest.Start(t, "", server.Config{RetentionTick: 50 * time.Millisecond,
		Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	aged := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "aged", Origins: []string{"http://site.test"}})
	kept := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "kept", Origins: []string{"http://site.test"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@aged.test", Password: "correct horse battery", SiteKeys: []string{aged.Key}})

	c := edgetest.Dial(t, e.Addr, aged.Key, "")
	up := upload(t, e.Addr, aged.Key, "http://site.test", c.Hello.Visitor, "shot.png", "image/png", onePixelPNG)
	c.Send(t, map[string]string{"type": "message", "client_id": "a-1", "text": "old news", "file": up.file.ID})
	ack := c.Read(t)
	other := edgetest.Dial(t, e.Addr, kept.Key, "")
	if _, err := other.SendAck("k-1", "kept forever"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(e.DataDir, "files", up.file.ID[:2], up.file.ID)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the attachment is not on disk: %v", err)
	}

	in := edgetest.Login(t, e.Addr, "ann@aged.test", "correct horse battery").NewToken(t)
	var settings struct {
		RetentionDays int `json:"retention_days"`
	}
	path := "/sites/" + strconv.FormatInt(aged.ID, 10) + "/settings"
	var refused struct{ Message string }
	if st := in.Do(t, "PUT", path, map[string]int{"retention_days": 4000}, &refused); st != 400 || refused.Message == "" {
		t.Fatalf("retention of 4000 days: %d %+v", st, refused)
	}
	if st := in.Do(t, "PUT", path, map[string]int{"retention_days": 30}, &settings); st != 200 || settings.RetentionDays != 30 {
		t.Fatalf("retention of 30 days: %d %+v", st, settings)
	}

	db := edgetest.OpenDB(t, e.DataDir)
	defer db.Close()
	conv := *ack.ConversationID
	// Not yet: the conversation is a day old in the edge's eyes.
	skew.Store(int64(24 * time.Hour))
	passes := func() float64 { v, _ := edgetest.Metric(e.MetricsAddr, "spookat_retention_passes_total"); return v }
	seen := passes()
	testkit.WaitFor(t, "two passes with the day-old conversation", 5*time.Second, func() bool { return passes() >= seen+2 })
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE id = ?`, conv); n != 1 {
		t.Fatal("a conversation a day old was deleted under a 30-day retention")
	}
	skew.Store(int64(31 * 24 * time.Hour))
	testkit.WaitFor(t, "the idle conversation deleted", 10*time.Second, func() bool {
		return edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations WHERE id = ?`, conv) == 0
	})
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE conversation_id = ?`, conv); n != 0 {
		t.Errorf("%d messages of the deleted conversation left", n)
	}
	testkit.WaitFor(t, "the attachment removed from disk", 5*time.Second, func() bool {
		_, err := os.Stat(file)
		return os.IsNotExist(err)
	})
	if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM conversations c JOIN sites s ON s.id = c.site_id WHERE s.key = '`+kept.Key+`'`); n != 1 {
		t.Errorf("the other site has %d conversations, want its 1", n)
	}
	// The pass counts what it deleted after it removed the files: wait for the count, then
	// check it is the one message (not the day-old passes' zeros, not twice).
	purged := func() float64 {
		v, _ := edgetest.Metric(e.MetricsAddr, `spookat_retention_purged_total{what="messages"}`)
		return v
	}
	testkit.WaitFor(t, "the purge counted", 5*time.Second, func() bool { return purged() >= 1 })
	if v := purged(); v != 1 {
		t.Errorf("spookat_retention_purged_total{what=messages} = %v, want 1", v)
	}
	back := edgetest.Dial(t, e.Addr, aged.Key, c.Hello.Visitor)
	if back.Hello.Visitor == c.Hello.Visitor {
		t.Error("the deleted visitor's token still names a visitor")
	}
}
