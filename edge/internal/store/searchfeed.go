package store

import "sync"

// feed hands the indexer the messages the writer committed, from memory: a pass that takes
// them does not read them back from the database through message_search, a join a row and
// three statements a pass (bench/path.md, twenty-first session).
//
// The feed holds every indexable message committed with an id above base, in commit order
// (ids only grow from one commit to the next). A pass may take them instead of reading the
// database only when both hold:
//   - through ≥ base: everything the index lacks is in the feed;
//   - its snapshot of search_forget, read before it takes the feed, has no forget to apply:
//     a message deleted before that snapshot is then not in the feed. Its forget was applied
//     by an earlier pass, which dropped the feed after its own snapshot, when the message was
//     committed already: the writer appends a commit's messages before it runs anything
//     else, so a message is in the feed before any commit can delete it.
//
// A message deleted after the snapshot is indexed by the pass, and its forget, which the next
// pass reads, finds it indexed and is applied. Every other pass reads the database as before
// and drops the feed; so does the writer when the feed outgrows a pass (an indexer behind).
type feed struct {
	mu   sync.Mutex
	base int64 // the feed holds every indexable message with an id above it
	upto int64 // the newest message id committed (indexable or not), once above base
	rows []feedRow
	max  int // the rows a pass takes at most (the indexer's chunk)
}

type feedRow struct {
	id, site int64
	text     string
}

// indexable says whether message_search lists the message: the feed must hold what a pass
// would read there.
func indexable(c *Committed) bool { return c.Kind == "" && c.Text != "" }

// add appends a commit's messages, msgs, which hold the messages with ids first to newest
// (the writer's, after the COMMIT).
func (f *feed) add(msgs []Committed, first, newest int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upto = newest
	if int64(len(msgs)) != newest-first+1 || len(f.rows)+len(msgs) > f.max {
		// A message the commit wrote but did not list (a Write's own INSERT), or an indexer
		// behind: the passes catch up from the database.
		f.dropLocked()
		return
	}
	for i := range msgs {
		if c := &msgs[i]; indexable(c) {
			f.rows = append(f.rows, feedRow{c.MessageID, c.SiteID, c.Text})
		}
	}
}

// take hands a pass whose index holds every message through `through` the rows it lacks,
// in spare (emptied; the feed keeps it for the next rows), and the newest message id they
// bring the index to. ok is false when the feed does not hold all it lacks.
func (f *feed) take(through int64, spare []feedRow) (rows []feedRow, newest int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if through < f.base {
		return nil, 0, false
	}
	clear(spare)
	rows, f.rows = f.rows, spare[:0]
	return rows, max(f.upto, through), true
}

// drop empties the feed: a pass reads the database until the index is through what it held.
func (f *feed) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropLocked()
}

func (f *feed) dropLocked() {
	clear(f.rows)
	f.rows = f.rows[:0]
	f.base = f.upto
}
