package store

import (
	"context"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// The log keeps a year: each new entry drops up to a hundred of the oldest past it, looking
// at the oldest hundred ids alone; entries within the year stay.
func TestAuditKeepsAYear(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	old := time.Now().Add(-AuditKeep - time.Hour).UnixMilli()
	recent := time.Now().Add(-AuditKeep + time.Hour).UnixMilli()
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		for i := range 150 {
			at := old
			if i >= 120 {
				at = recent
			}
			if err := tx.exec(`INSERT INTO audit (at, site_id, operator_id, actor, address, action, detail) VALUES (?, 0, 0, 'cli', '', 'backup', '')`, at); err != nil {
				return err
			}
		}
		return nil
	}))
	count := func() (n int) {
		testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
			st, err := q.Stmt(`SELECT count(*) FROM audit`)
			if err != nil {
				return err
			}
			if st.Step() {
				n = st.ColumnInt(0)
			}
			return st.Err()
		}))
		return n
	}
	for i, want := range []int{
		150 + 1 - 100, // a hundred of the 120 old ones go
		51 + 1 - 20,   // the last 20 old ones; the 30 recent and the new ones stay
		33,
	} {
		testkit.NoErr(t, s.Audit(ctx, AuditEntry{Actor: ActorCLI, Action: AuditBackup}))
		if n := count(); n != want {
			t.Fatalf("after entry %d: %d entries, want %d", i+1, n, want)
		}
	}
}
