package store

import "context"

// The search index (messages_fts) follows the messages in batches rather than in each
// message's own transaction: FTS5 writes a segment of its index at the end of every
// transaction that touched it and merges them as they pile up, so indexing each commit of
// a few dozen messages cost the visitor's path about three times what one pass over a
// thousand does (bench/issue34.md). The writer adds what is new at the end of a commit once
// indexBatch messages wait, and on its half-second tick whatever waits: a message is
// searchable within about a second, and the index and its watermark (search_index.through)
// move in one transaction, so a crash leaves nothing half indexed.

// indexBatch is how many new messages make a commit index them.
const indexBatch = 2000

func (s *Store) loadIndexed() error {
	st, _, err := s.w.Prepare(`SELECT through FROM search_index WHERE id = 1`)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Step() {
		s.indexed = st.ColumnInt64(0)
	}
	return st.Err()
}

// newestMessage is the id of the newest message written (or a little above: ids are handed
// out in blocks, and a restart skips the rest of the block).
func (s *Store) newestMessage() int64 { return s.ids.nextMsg - 1 }

// indexBehind says whether messages wait for the index.
func (s *Store) indexBehind() bool { return !s.opts.noSearch && s.newestMessage() > s.indexed }

// indexNew indexes, in tx, the messages above s.indexed when enough wait or the tick asked
// for it; it returns the new watermark (0: nothing done), which is s.indexed once tx commits.
func (s *Store) indexNew(tx *Tx) (int64, error) {
	to := s.newestMessage()
	if !s.indexBehind() || (to-s.indexed < indexBatch && !s.indexDue) {
		return 0, nil
	}
	if err := tx.exec(`INSERT INTO messages_fts (rowid, site, text) SELECT id, site, text FROM message_search WHERE id > ? AND id <= ?`, s.indexed, to); err != nil {
		return 0, err
	}
	if err := tx.exec(`UPDATE search_index SET through = ? WHERE id = 1`, to); err != nil {
		return 0, err
	}
	return to, nil
}

// IndexNow brings the search index up to date at once rather than within the second (tests,
// and whoever needs a search to see a message just written).
func (s *Store) IndexNow(ctx context.Context) error {
	return s.Write(ctx, func(*Tx) error {
		s.indexDue = true // read by indexNew at the end of this commit, on the writer's goroutine
		return nil
	})
}
