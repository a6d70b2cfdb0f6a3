package files

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// A site's own quota (its plan's, SiteQuota) bounds its attachments before the edge's; a site
// without one has the edge's. A refused file writes nothing.
func TestSiteQuota(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{Readers: 1})
	testkit.NoErr(t, err)
	defer st.Close()
	var small, big *store.Site
	for _, s := range []**store.Site{&small, &big} {
		*s = &store.Site{Name: "s", Origins: []string{"*"}}
		testkit.NoErr(t, st.Write(context.Background(), func(tx *store.Tx) error { return tx.AddSite(*s) }))
	}
	in := &Intake{Store: st, Dir: Dir{Root: t.TempDir()}, Quota: 10_000, Reserve: -1, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SiteQuota: func(site int64) int64 {
			if site == small.ID {
				return 100 // the plan's storage
			}
			return 0 // no plan limit: the edge's Quota
		}}
	data := append(append([]byte(nil), png...), make([]byte, 200)...)
	if _, p := in.TakeBytes(context.Background(), small.ID, 1<<20, "a.png", "image/png", data, []byte("x")); p == nil || p.Code != schema.CodeQuota {
		t.Fatalf("past the plan's storage: %+v", p)
	}
	if row, p := in.TakeBytes(context.Background(), big.ID, 1<<20, "a.png", "image/png", data, []byte("x")); p != nil || row == nil {
		t.Fatalf("within the edge's quota: %+v", p)
	}
	if n, err := st.SiteFileBytes(context.Background(), small.ID, time.Time{}); err != nil || n != 0 {
		t.Fatalf("the refused file left %d bytes (%v)", n, err)
	}
}
