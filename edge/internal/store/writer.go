package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema"
)

// MessageRequest asks the writer to store one message. Done is called from the writer
// goroutine after the commit (or the failure) and must not block.
type MessageRequest struct {
	SiteID int64
	// VisitorID is 0 for a visitor not stored yet: the writer creates it from TokenHash.
	// Visitors are stored with their first message, so a page view costs no write.
	VisitorID int64
	TokenHash []byte
	// ConversationID is 0 when the caller does not know it: the writer finds the visitor's
	// conversation or opens one.
	ConversationID int64
	Author         schema.Author
	Name           string
	Text           string
	// Source is where the message was written ("": schema.SourceWidget for a visitor,
	// schema.SourceInbox for anyone else).
	Source   schema.Source
	ClientID string // idempotency key within the conversation and source; "" for none
	Internal bool   // operator note: stored, never shown to the visitor, no jobs
	// Origin is an opaque tag of the sender (its connection), copied to Committed so that
	// live fan-out can skip the sender, who gets an ack instead.
	Origin any
	// Claim is an unverified identify made before the visitor was stored: written on the
	// visitor the message creates.
	Claim *Identity
	// File is the upload the message carries (read and checked by the caller: the site's,
	// uploaded by this visitor's token); nil for none.
	File *File
	Kind schema.MessageKind // what a system message is ("" for a written one)
	// SnoozeUntil is when a KindSnoozed conversation reopens by itself (Unix ms).
	SnoozeUntil int64
	// AssigneeID is the operator a KindAssigned message assigns the conversation to (0:
	// nobody).
	AssigneeID int64
	// wakeDue, on the snooze tick's KindReopened, reopens only a conversation still snoozed
	// and due by then (Unix ms): one snoozed again meanwhile stays snoozed.
	wakeDue int64
	// Context is the page the visitor is on (nil: not known): written on the visitor and on
	// the conversation that a first message creates, and on the visitor by a later message
	// whose visitor is already known (a page that could not be stored when it was reported: the
	// site's write cap was spent, or the write failed).
	Context *schema.VisitorContext
	Done    func(MessageResult)
}

// MessageResult is the outcome of a MessageRequest.
type MessageResult struct {
	MessageID      int64
	ConversationID int64
	VisitorID      int64
	CreatedAt      int64 // Unix ms
	Duplicate      bool  // the client id was stored before: same message, nothing new stored
	First          bool  // this message opened the conversation
	Unchanged      bool  // a status message for the status the conversation had: nothing stored
	Err            error
}

type request struct {
	msg     *MessageRequest
	fn      func(*Tx) error
	fnDone  chan error
	durable bool // its commit is synced whatever Options.SyncFull says (WriteDurable)
	res     MessageResult
}

// SubmitMessage queues a message for the next group commit. It never waits for the commit:
// req.Done is called after it. It fails at once when the store is closed or its queue is full.
func (s *Store) SubmitMessage(req *MessageRequest) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if len(s.queue) >= s.opts.MaxQueue {
		s.mu.Unlock()
		return ErrBusy
	}
	s.queue = append(s.queue, request{msg: req})
	s.mu.Unlock()
	s.signal()
	return nil
}

// Write runs fn inside the writer's next transaction and waits for the commit. fn runs in a
// savepoint of its own: its error rolls back its work alone and is returned here.
func (s *Store) Write(ctx context.Context, fn func(*Tx) error) error {
	return s.write(ctx, fn, false)
}

// WriteDurable is Write for what a power cut must never take once it is answered: a site, an
// operator, a password, a token, settings. Its commit is synced (synchronous=FULL for that
// one transaction) even when the store runs with NORMAL, which may lose the last commits.
func (s *Store) WriteDurable(ctx context.Context, fn func(*Tx) error) error {
	return s.write(ctx, fn, true)
}

func (s *Store) write(ctx context.Context, fn func(*Tx) error, durable bool) error {
	done := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, request{fn: fn, fnDone: done, durable: durable})
	s.mu.Unlock()
	s.signal()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Running reports whether the writer goroutine is alive (for /readyz).
func (s *Store) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Flush waits until everything queued before it is committed and handed to the listeners.
func (s *Store) Flush(ctx context.Context) error {
	return s.Write(ctx, func(*Tx) error { return nil })
}

// SetObservers sets callbacks for each commit's batch size and duration (for /metrics).
// Call before traffic starts.
func (s *Store) SetObservers(batch func(int), duration func(time.Duration)) {
	s.stats.OnBatch, s.stats.OnCommitLatency = batch, duration
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writeLoop is the single writer. It sleeps until woken, then lets more messages join the
// batch before committing everything queued: on one core, draining at once gives batches of
// one row or little more, and each commit has a fixed cost (locks, WAL frames). At low rates
// it only yields once, so a lone message is not delayed; from WindowRate requests a second it
// sleeps CommitWindow, which lets the runtime poll the network and run every reader with a
// frame ready.
func (s *Store) writeLoop() {
	defer close(s.done)
	persist := time.NewTicker(500 * time.Millisecond)
	defer persist.Stop()
	var rate arrivalRate
	for {
		stopping, tick := false, false
		select {
		case <-s.wake:
			if s.opts.CommitWindow > 0 && rate.perSecond >= s.opts.WindowRate {
				time.Sleep(s.opts.CommitWindow)
			} else {
				runtime.Gosched()
			}
		case <-persist.C:
			tick = true
		case <-s.stop:
			stopping = true
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = s.spare[:0]
		s.mu.Unlock()
		persistWatermark := (tick || stopping) && s.watermarkMoved()
		s.trimDue = (tick || stopping) && s.idx.applied.Load() > s.forgetTrimmed
		if len(batch) > 0 || persistWatermark || s.trimDue {
			s.commit(batch, persistWatermark)
			s.walCheckpoint()
		}
		rate.observe(len(batch), time.Now())
		clear(batch) // drop references to requests and closures
		s.spare = batch[:0]
		if stopping {
			return
		}
	}
}

// arrivalRate counts requests over windows of 100 ms: a moving average of each batch's size
// over the time since the previous commit is fooled by bursts (three messages half a
// millisecond apart read as 6,000 a second at a real rate of 1,000).
type arrivalRate struct {
	perSecond float64
	start     time.Time
	count     int
}

func (r *arrivalRate) observe(n int, now time.Time) {
	r.count += n
	if r.start.IsZero() {
		r.start = now
		return
	}
	if dt := now.Sub(r.start); dt >= 100*time.Millisecond {
		r.perSecond = float64(r.count) / dt.Seconds()
		r.start, r.count = now, 0
	}
}

// publisherWatermark returns the publisher's watermark when it moved since it was last
// persisted (none before the publisher has handed one over).
func (s *Store) publisherWatermark() (int64, bool) {
	wm := s.watermark.Load()
	return wm, wm >= 0 && wm != s.persistedWatermark
}

func (s *Store) watermarkMoved() bool {
	_, moved := s.publisherWatermark()
	return moved
}

// commit stores a batch in one transaction. If the batch fails as a whole (a full disk, a
// broken row), each request is retried alone so that one bad request fails by itself.
func (s *Store) commit(batch []request, persistWatermark bool) {
	start := time.Now()
	committed, err := s.runTx(batch, start, persistWatermark)
	if err == nil {
		s.finish(batch, committed)
		if cb := s.stats.OnCommitLatency; cb != nil {
			cb(time.Since(start))
		}
		return
	}
	if len(batch) == 1 {
		s.fail(batch, err)
		return
	}
	for i := range batch {
		one := batch[i : i+1]
		if committed, err := s.runTx(one, start, persistWatermark && i == 0); err != nil {
			s.fail(one, err)
		} else {
			s.finish(one, committed)
		}
	}
}

// keepCommittedMax bounds the records the writer keeps for the next commit: a burst's batch
// grows the slice further, and then lets it go.
const keepCommittedMax = 1024

// keepCommitted keeps a commit's records' slice for the next commit, which would otherwise
// allocate a few hundred bytes a message; the listeners have copied what they keep. A commit
// without messages took no slice, and leaves the kept one where it is.
func (s *Store) keepCommitted(committed []Committed) {
	clear(committed) // no text, file or socket kept alive by the slice
	if c := cap(committed); c > 0 && c <= keepCommittedMax {
		s.committedBuf = committed[:0]
	}
}

func (s *Store) fail(batch []request, err error) {
	for i := range batch {
		r := &batch[i]
		switch {
		case r.msg != nil:
			r.msg.Done(MessageResult{Err: err})
			r.msg = nil // answered
		case r.fnDone != nil:
			r.fnDone <- err
			r.fnDone = nil
		}
	}
}

// finish answers every request of a committed batch, then hands the stored messages on.
func (s *Store) finish(batch []request, committed []Committed) {
	if len(committed) > 0 {
		for _, c := range s.opts.Counters {
			c.Committed(committed)
		}
	}
	for i := range batch {
		r := &batch[i]
		if r.msg != nil {
			r.msg.Done(r.res)
		}
	}
	if len(committed) > 0 {
		for _, l := range s.opts.Listeners {
			l.Committed(committed)
		}
	}
	// Write and Flush callers last: once Flush returns, every message committed before it has
	// been handed to the listeners too (the stop drains the publisher right after a Flush;
	// answered before them, a batch's jobs could be missed and left to the next start's replay).
	for i := range batch {
		if fd := batch[i].fnDone; fd != nil {
			fd <- nil
			batch[i].fnDone = nil
		}
	}
	s.stats.mu.Lock()
	s.stats.Commits++
	s.stats.MessagesSaved += int64(len(committed))
	s.stats.BatchSizeSum += int64(len(batch))
	s.stats.mu.Unlock()
	if cb := s.stats.OnBatch; cb != nil {
		cb(len(batch))
	}
	s.keepCommitted(committed)
}

// convUpdate collects, per conversation, what a batch changed, so each conversation row is
// updated once per commit however many of its messages the batch holds.
type convUpdate struct {
	id, first, last int64
	// reopen is the index in committed of the first visitor message since the batch began
	// or since its last status change for the conversation, while that message's reopening
	// is still to run (in the conversation's update at the end); -1 when there is none.
	reopen int
}

// convSet is the update of a conversation a commit wrote messages to.
const convSet = `UPDATE conversations SET last_message_id = ?2, updated_at = ?3,
	first_message_id = CASE first_message_id WHEN 0 THEN ?4 ELSE first_message_id END`

func (s *Store) runTx(batch []request, start time.Time, persistWatermark bool) (committed []Committed, err error) {
	now := start.UnixMilli()
	tx := &Tx{c: s.w, stmts: &s.wstmts, now: now, ids: &s.ids}
	firstID := s.ids.nextMsg // the ids from it to newestMessage are this commit's messages
	msgs, newConvs, durable := 0, 0, false
	for i := range batch {
		durable = durable || batch[i].durable
		if m := batch[i].msg; m != nil {
			msgs++
			if m.ConversationID == 0 {
				newConvs++
			}
		}
	}
	before := s.ids
	defer func() {
		if err != nil {
			s.ids = before // nothing of this commit was given out
		}
	}()
	raise := s.ids.reserve(int64(msgs), int64(newConvs))
	if !s.opts.SyncFull && (raise || durable) {
		if err := tx.exec(`PRAGMA synchronous=FULL`); err != nil {
			return nil, err
		}
		defer func() { _ = s.w.Exec(`PRAGMA synchronous=NORMAL`) }()
	}
	if err := tx.exec(`BEGIN IMMEDIATE`); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.w.Exec(`ROLLBACK`)
		}
	}()
	if raise {
		if err := tx.exec(`UPDATE id_limits SET messages = ?, conversations = ? WHERE id = 1`, s.ids.msgLimit, s.ids.convLimit); err != nil {
			return nil, err
		}
	}
	if msgs > 0 {
		committed = s.committedBuf[:0]
		s.committedBuf = nil // until keepCommitted: a listener's panic must not leave it shared
		if cap(committed) < msgs {
			committed = make([]Committed, 0, msgs) // sized once: a batch's records are a few hundred bytes each
		}
	}
	// The batch's conversations, in the order it first wrote to each (kept from commit to
	// commit: the writer's).
	convs, convAt := s.convs[:0], s.convAt
	clear(convAt)
	defer func() { clear(convs); s.convs = convs[:0] }()
	conv := func(id int64) *convUpdate {
		if i, ok := convAt[id]; ok {
			return &convs[i]
		}
		return nil
	}
	for i := range batch {
		r := &batch[i]
		if r.fn != nil {
			if len(batch) == 1 && !persistWatermark && !s.trimDue {
				// Alone in its commit: its error rolls the commit back (commit answers it), so
				// no savepoint, whose journal would copy each page the callback changes.
				if err := r.fn(tx); err != nil {
					return nil, err
				}
				continue
			}
			if ferr := tx.savepoint(r.fn); ferr != nil {
				r.fnDone <- ferr
				r.fnDone = nil
			}
			continue
		}
		if r.msg == nil {
			continue // answered by an earlier, failed attempt
		}
		if u := conv(r.msg.ConversationID); u != nil && r.msg.Kind.Status() != "" {
			// A status change after the visitor's message: the visitor reopened it first,
			// then this change stands, until the visitor's next message.
			if u.reopen >= 0 {
				if err := tx.reopenNow(&committed[u.reopen]); err != nil {
					return nil, err
				}
			}
			u.reopen = -1
		}
		c, err := tx.insertMessage(r.msg, &r.res)
		if err != nil {
			return nil, err
		}
		if r.res.Duplicate {
			continue
		}
		if err := addJobFacts(tx.Stmt, &c); err != nil {
			return nil, err
		}
		if c.Kind.Changes() {
			// A status change or an assignment is not the conversation's last message: it
			// neither makes it unread for the other operators nor replaces the list's preview.
			committed = append(committed, c)
			continue
		}
		u := conv(c.ConversationID)
		if u == nil {
			convAt[c.ConversationID] = len(convs)
			convs = append(convs, convUpdate{id: c.ConversationID, first: c.MessageID, reopen: -1})
			u = &convs[len(convs)-1]
		}
		u.last = c.MessageID
		if c.Author == schema.AuthorVisitor && u.reopen < 0 {
			u.reopen = len(committed)
		}
		committed = append(committed, c)
	}
	for i := range convs {
		u := &convs[i]
		if u.reopen < 0 {
			if err := tx.setConv(convSet+` WHERE id = ?1`, u.id, u.last, now, u.first); err != nil {
				return nil, err
			}
			continue
		}
		// Most conversations a visitor writes to are open: the usual update finds that out,
		// and only a closed one takes a second statement to reopen it.
		if err := tx.setConv(convSet+` WHERE id = ?1 AND status = 'open'`, u.id, u.last, now, u.first); err != nil {
			return nil, err
		}
		if tx.c.Changes() == 1 {
			continue
		}
		if err := tx.setConv(convSet+`, status = 'open', snoozed_until = 0 WHERE id = ?1`, u.id, u.last, now, u.first); err != nil {
			return nil, err
		}
		if c := &committed[u.reopen]; tx.c.Changes() == 1 {
			c.Reopened = true
			if err := tx.markReopened(c); err != nil {
				return nil, err
			}
		}
	}
	wm, moved := s.publisherWatermark()
	if moved = moved && persistWatermark; moved {
		if err := tx.exec(`UPDATE outbox SET published_through = ? WHERE id = 1`, wm); err != nil {
			return nil, err
		}
		if err := tx.exec(`DELETE FROM outbox_cuts WHERE through <= ?`, wm); err != nil {
			return nil, err
		}
	}
	trimTo := s.idx.applied.Load()
	if s.trimDue {
		if err := tx.deleteForgotten(trimTo); err != nil {
			return nil, err
		}
	}
	if err := tx.exec(`COMMIT`); err != nil {
		return nil, err
	}
	if moved {
		s.persistedWatermark = wm
	}
	if s.trimDue {
		s.forgetTrimmed = trimTo
	}
	newest := s.newestMessage()
	s.newestCommitted.Store(newest)
	commitCount.Add(1)
	// The feed before the count: a pass reads the count before it takes the feed, so a
	// commit it missed is one it sees counted and the next tick is due (indexer.due).
	if !s.opts.noSearch && newest >= firstID {
		s.idx.feed.add(committed, firstID, newest)
	}
	s.idx.commits.Add(1)
	if !s.opts.noSearch && newest-s.idx.seen.Load() >= indexBatch {
		s.idx.wake()
	}
	return committed, nil
}

// reopenNow reopens c's closed conversation before the batch's status change for it.
func (tx *Tx) reopenNow(c *Committed) error {
	if err := tx.exec(`UPDATE conversations SET status = 'open', snoozed_until = 0 WHERE id = ? AND status != 'open'`, c.ConversationID); err != nil {
		return err
	}
	if c.Reopened = tx.c.Changes() == 1; c.Reopened {
		return tx.markReopened(c)
	}
	return nil
}

// markReopened records on the visitor's message that it reopened the conversation (replay
// and the inbox read it).
func (tx *Tx) markReopened(c *Committed) error {
	return tx.exec(`UPDATE messages SET reopened = 1 WHERE id = ?`, c.MessageID)
}

// Tx is the writer's transaction as seen by a Write callback.
type Tx struct {
	c     *sqlite3.Conn
	stmts *stmtCache
	now   int64
	ids   *ids // the writer's id limits; nil outside a commit of messages
}

// Now is the transaction's timestamp in Unix ms.
func (tx *Tx) Now() int64 { return tx.now }

// Stmt returns a prepared statement on the write connection (reset by the caller's
// helpers; prefer Exec/QueryRow).
func (tx *Tx) Stmt(sql string) (*sqlite3.Stmt, error) { return tx.stmts.get(sql) }

// savepoint runs fn in a savepoint of its own (prepared statements: Conn.Exec would parse
// each of them again).
func (tx *Tx) savepoint(fn func(*Tx) error) error {
	if err := tx.exec(`SAVEPOINT req`); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.exec(`ROLLBACK TO req`)
		_ = tx.exec(`RELEASE req`)
		return err
	}
	return tx.exec(`RELEASE req`)
}

func (tx *Tx) exec(sql string, args ...any) error {
	st, err := tx.stmts.get(sql)
	if err != nil {
		return err
	}
	if err := bind(st, args); err != nil {
		return err
	}
	err = st.Exec()
	st.ClearBindings()
	return err
}

// setConv runs one of the convSet updates, its four values bound by type: tx.exec's ...any
// would box each of them, a conversation a commit.
func (tx *Tx) setConv(sql string, id, last, now, first int64) error {
	st, err := tx.stmts.get(sql)
	if err != nil {
		return err
	}
	err = errors.Join(st.BindInt64(1, id), st.BindInt64(2, last), st.BindInt64(3, now), st.BindInt64(4, first))
	if err == nil {
		err = st.Exec()
	}
	st.ClearBindings()
	return err
}

// Exec runs a statement that returns no rows.
func (tx *Tx) Exec(sql string, args ...any) error { return tx.exec(sql, args...) }

// LastInsertRowID is the rowid of the last INSERT.
func (tx *Tx) LastInsertRowID() int64 { return tx.c.LastInsertRowID() }

// QueryRow runs a statement and scans its first row into dest; found is false when it
// returned no row.
func (tx *Tx) QueryRow(sql string, args []any, dest ...any) (found bool, err error) {
	st, err := tx.stmts.get(sql)
	if err != nil {
		return false, err
	}
	return queryRow(st, args, dest...)
}

func queryRow(st *sqlite3.Stmt, args []any, dest ...any) (found bool, err error) {
	defer func() {
		if rerr := st.Reset(); err == nil && rerr != nil && !found {
			err = rerr
		}
		st.ClearBindings()
	}()
	if err := bind(st, args); err != nil {
		return false, err
	}
	if !st.Step() {
		return false, st.Err()
	}
	return true, scan(st, dest...)
}

// readList runs a query on a reader and returns one T per row, read into the pointers dest
// gives for it. No rows is an empty list, not nil (the API shows [], not null).
func readList[T any](ctx context.Context, s *Store, sql string, args []any, dest func(*T) []any) ([]T, error) {
	out := []T{}
	err := s.Read(ctx, func(q Querier) error {
		st, err := q.Stmt(sql)
		if err != nil {
			return err
		}
		return eachRow(st, args, func() error {
			var v T
			if err := scan(st, dest(&v)...); err != nil {
				return err
			}
			out = append(out, v)
			return nil
		})
	})
	return out, err
}

// eachRow binds args and calls fn once per row of st (fn reads it with scan).
func eachRow(st *sqlite3.Stmt, args []any, fn func() error) error {
	if err := bind(st, args); err != nil {
		return err
	}
	for st.Step() {
		if err := fn(); err != nil {
			return err
		}
	}
	return st.Err()
}

// scan reads the current row into pointers to int64, int, string, bool or []byte.
func scan(st *sqlite3.Stmt, dest ...any) error {
	for i, d := range dest {
		switch p := d.(type) {
		case *int64:
			*p = st.ColumnInt64(i)
		case *int:
			*p = st.ColumnInt(i)
		case *string:
			*p = st.ColumnText(i)
		case *schema.Source:
			*p = schema.Source(st.ColumnText(i))
		case *schema.Author:
			*p = schema.Author(st.ColumnText(i))
		case *schema.DeliveryStatus:
			*p = schema.DeliveryStatus(st.ColumnText(i))
		case *schema.ConvStatus:
			*p = schema.ConvStatus(st.ColumnText(i))
		case *schema.MessageKind:
			*p = schema.MessageKind(st.ColumnText(i))
		case *bool:
			*p = st.ColumnBool(i)
		case *[]byte:
			*p = st.ColumnBlob(i, (*p)[:0])
		case **schema.File: // four columns, last: key, name, type, size (key NULL: none)
			*p = nil
			if st.ColumnType(i) != sqlite3.NULL {
				*p = &schema.File{ID: st.ColumnText(i), Name: st.ColumnText(i + 1), Type: st.ColumnText(i + 2), Size: st.ColumnInt64(i + 3)}
			}
			return nil
		default:
			return fmt.Errorf("store: cannot scan into %T", d)
		}
	}
	return nil
}

func bind(st *sqlite3.Stmt, args []any) error {
	for i, a := range args {
		var err error
		switch v := a.(type) {
		case int64:
			err = st.BindInt64(i+1, v)
		case int:
			err = st.BindInt64(i+1, int64(v))
		case string:
			err = st.BindText(i+1, v)
		case schema.Author:
			err = st.BindText(i+1, string(v))
		case schema.DeliveryStatus:
			err = st.BindText(i+1, string(v))
		case schema.ConvStatus:
			err = st.BindText(i+1, string(v))
		case []byte:
			err = st.BindBlob(i+1, v)
		case bool:
			err = st.BindBool(i+1, v)
		case nil:
			err = st.BindNull(i + 1)
		default:
			err = fmt.Errorf("store: cannot bind %T", a)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
