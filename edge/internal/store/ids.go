package store

// ids hands out message and conversation ids that no power cut can hand out twice. The
// limits are persisted (table id_limits); ids below a limit may be handed out, and a commit
// that needs one at or past it raises the limit by a block in the same transaction, synced
// whatever Options.SyncFull says. Each start begins at the persisted limits, above every id
// the last run may have given out, whatever a cut took from the WAL; a clean stop lowers them
// to the next ids, so that only a crash leaves a gap. Used by the writer only.
type ids struct {
	nextMsg, msgLimit   int64
	nextConv, convLimit int64
}

// idBlock is how many ids a raised limit makes available: one synced commit per block.
const idBlock = 100_000

func (s *Store) loadIDs() error {
	st, _, err := s.w.Prepare(`SELECT messages, conversations, running FROM id_limits WHERE id = 1`)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Step() {
		s.ids.msgLimit, s.ids.convLimit = st.ColumnInt64(0), st.ColumnInt64(1)
		s.unclean = st.ColumnInt64(2) != 0
	}
	if err := st.Err(); err != nil {
		return err
	}
	s.ids.nextMsg, s.ids.nextConv = s.ids.msgLimit, s.ids.convLimit
	return nil
}

// reserve makes room for up to msgs messages and convs conversations in this commit: it says
// whether the limits must be raised (then the commit must be synced).
func (d *ids) reserve(msgs, convs int64) (raise bool) {
	if d.nextMsg+msgs > d.msgLimit {
		d.msgLimit = d.nextMsg + msgs + idBlock
		raise = true
	}
	if d.nextConv+convs > d.convLimit {
		d.convLimit = d.nextConv + convs + idBlock
		raise = true
	}
	return raise
}
