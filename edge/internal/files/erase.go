package files

import (
	"context"
	"time"

	"spookat/edge/internal/store"
)

// ErasePerson erases a person in a site to the bytes: the rows (store.ErasePerson, secure
// delete), their attachments' files, then the WAL emptied so the deleted pages' old images go
// too. WALEmptied is false when readers or a burst of commits kept the WAL from emptying
// within a few tries: the erasure stands, and the old images go with the next restart of the
// WAL (the writer restarts it at -wal-max-pages); run it again to be sure.
func ErasePerson(ctx context.Context, st *store.Store, dir Dir, siteID int64, sel store.PersonSelector, who *store.AuditEntry) (e *store.Erased, walEmptied bool, err error) {
	if e, err = st.ErasePerson(ctx, siteID, sel, who); err != nil {
		return nil, false, err
	}
	for _, key := range e.FileKeys {
		_ = dir.Remove(key) // already gone is gone
	}
	for try := 0; try < 5 && !walEmptied; try++ {
		if try > 0 {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return e, false, nil
			}
		}
		walEmptied = st.TruncateWAL(ctx) == nil
	}
	return e, walEmptied, nil
}
