package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"spookat/schema/testkit"
)

// A Write whose callback fails leaves nothing of its own work and gets its error back,
// alone in its commit (no savepoint: the commit is rolled back) or beside others in one
// (its savepoint is), where the others' work stays.
func TestWriteErrorUndoesItsOwnWork(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	cut := func(n int64, err error) func(*Tx) error {
		return func(tx *Tx) error {
			if e := tx.SaveOutboxCut(n); e != nil {
				return e
			}
			return err
		}
	}
	has := func(n int64) bool {
		var found int64
		testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
			st, err := q.Stmt(`SELECT count(*) FROM outbox_cuts WHERE through = ?`)
			if err != nil {
				return err
			}
			_, err = queryRow(st, []any{n}, &found)
			return err
		}))
		return found == 1
	}

	t.Run("alone", func(t *testing.T) {
		if err := s.Write(ctx, cut(101, boom)); !errors.Is(err, boom) {
			t.Fatalf("Write: %v; want boom", err)
		}
		testkit.NoErr(t, s.Write(ctx, cut(102, nil)))
		if has(101) || !has(102) {
			t.Fatalf("cuts 101 %v, 102 %v; want only 102", has(101), has(102))
		}
	})
	t.Run("in a batch", func(t *testing.T) {
		// The first Write holds the writer inside its commit until the other two are queued:
		// they then share the next commit.
		started, release := make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() {
			first <- s.Write(ctx, func(tx *Tx) error { close(started); <-release; return tx.SaveOutboxCut(200) })
		}()
		<-started
		defer func() {
			select {
			case <-release:
			default:
				close(release) // a failure below must not leave the writer held
			}
		}()
		failed, kept := make(chan error, 1), make(chan error, 1)
		go func() { failed <- s.Write(ctx, cut(201, boom)) }()
		go func() { kept <- s.Write(ctx, cut(202, nil)) }()
		testkit.WaitFor(t, "both Writes queued", 5*time.Second, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.queue) == 2
		})
		close(release)
		testkit.NoErr(t, <-first)
		if err := <-failed; !errors.Is(err, boom) {
			t.Fatalf("Write: %v; want boom", err)
		}
		testkit.NoErr(t, <-kept)
		if !has(200) || has(201) || !has(202) {
			t.Fatalf("cuts 200 %v, 201 %v, 202 %v; want 200 and 202", has(200), has(201), has(202))
		}
	})
}
