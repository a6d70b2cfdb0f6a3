// Package jobs turns committed messages into delivery jobs (Build) and publishes them to the
// JOBS stream (Publisher).
//
// The writer hands every commit's messages to the Publisher, which publishes asynchronously
// (the visitor's ack never waits on NATS). Jobs travel in batches (see schema.HeaderJobs): the
// publisher collects the jobs of a publish window (Config.Window, or Config.WindowJobs jobs, or
// until a batch would pass schema.BatchMaxBytes) and publishes one JOBS message per lane
// partition for it, so JetStream stores, delivers, acks and deletes one message for many jobs.
//
// Crash rules. Before a window's batches are published, the window's end (its last message
// id) is persisted through a normal write of the store (Config.SaveCut); a batch's
// Nats-Msg-Id is schema.BatchID(lane, partition, end). The publisher keeps a watermark: the
// highest message id such that every job of every message up to it has been stored by
// JetStream (its PubAck came back); the writer persists it with its commits and drops the
// window ends at or below it. After a crash, the edge hands the publisher the messages above
// the persisted watermark and the window ends persisted above it (Config.ReplayCuts): it
// re-forms exactly those windows, with the same batch ids, and JetStream's duplicate window
// drops the batches that had been stored. Messages past the last persisted end had not been
// published at all. This costs no outbox row per message, one per window.
//
// Order: JOBS must hold a conversation's jobs in the order of its messages, or a worker posts
// them out of order. A conversation's jobs of one lane are in one partition (schema
// JobPartition), in id order within a batch; a partition has at most one batch in flight: the
// next goes out when JetStream has stored the previous one, and a publish that fails is sent
// again before any later one of its partition. Partitions proceed in parallel.
//
// A full JOBS (its byte budget reached, workers or Slack away for hours) refuses new batches.
// The publisher keeps them, above the watermark, and probes for room once a second with one
// batch; when one is stored it releases the held ones in doubling rounds, so a stream that has
// room for a few at a time costs a few refusals, not one per held batch every retry.
package jobs

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/files"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Targets returns the delivery settings of a site, or nil for an unknown site.
type Targets func(siteID int64) *schema.SiteDelivery

// DefaultWindow is how long a job waits for others of its window at most: the time Slack and
// the other targets may see a message later. DefaultWindowJobs closes a window sooner once it
// holds that many jobs: from ~2,500 messages a second a window is shorter than DefaultWindow,
// and its batches carry ~32 jobs a partition whatever the rate. Each batch costs JetStream a
// store, a delivery, an ack and a delete, and the worker a fetch and an ack; below that rate
// most batches held one or two jobs, and these costs were most of the edge's and the worker's
// CPU a message (bench/path.md, fourteenth session).
const (
	DefaultWindow     = 200 * time.Millisecond
	DefaultWindowJobs = 512
)

// Config says what jobs a message gets.
type Config struct {
	Targets Targets
	// InboxURL links a conversation in the web inbox (put in every job).
	InboxURL func(conversationID int64) string
	// VisitorHere reports whether a conversation's visitor has the chat open: an operator's
	// reply is then not emailed (nil: never).
	VisitorHere func(conversationID int64) bool
	// Files signs the link of an attachment in its jobs, under PublicURL (nil: no link).
	Files     *files.Signer
	PublicURL string
	// Window is how long the first job of a window waits for company (0: DefaultWindow).
	Window time.Duration
	// WindowJobs closes a window before its time once it holds this many jobs (0:
	// DefaultWindowJobs).
	WindowJobs int
	// SyncLag, when JetStream answers before its data is on disk (syncing every interval),
	// is how old a watermark must be before the ledger gets it: by then JetStream has synced
	// the jobs it covers, so a power cut cannot take jobs the persisted watermark passed.
	// 0: JetStream syncs before it answers, the watermark goes over at once.
	SyncLag time.Duration
	Log     *slog.Logger
}

// Ledger is where the publisher's progress survives a crash: the store.
type Ledger interface {
	// PublishedThrough is the watermark the last run persisted; OutboxCuts are the window
	// ends persisted above it, ascending: the first windows of the replay end exactly there.
	PublishedThrough() int64
	OutboxCuts() []int64
	// SaveCut persists a window's end and calls done once it is committed (or failed: the
	// publisher tries again). It must not block.
	SaveCut(through int64, done func(error))
	// SetWatermark hands over the watermark, for the ledger to persist when it likes.
	SetWatermark(through int64)
}

// Publisher publishes jobs and tracks the watermark.
type Publisher struct {
	js     jetstream.JetStream
	cfg    Config
	ledger Ledger // nil: windows are published unrecorded (tests of the publisher alone)
	log    *slog.Logger

	mu        sync.Mutex
	queue     []store.Committed // handed over by the writer, not yet taken by the loop
	unhandled int               // messages handed over, not yet taken
	open      window            // collecting jobs
	sealed    []*window         // sealed windows not yet stored by JetStream, in order
	pending   int               // jobs in open and sealed windows
	retry     []*nats.Msg       // publishes that failed, to send again
	ready     []*nats.Msg       // next batches of partitions whose previous batch was stored
	subjects  map[string]*line  // partitions (see partitionOf) with a batch in flight
	handled   int64             // highest message id taken from the queue
	replay    []int64           // persisted window ends still to re-form
	replayEnd bool              // every replayed message is queued (EndReplay)
	flushing  bool              // Drain: seal at once
	published int64             // jobs published, for metrics
	batches   int64             // batches published, for metrics
	failed    int               // publishes failed since the last log line about them
	lastLog   time.Time
	cutFailed time.Time // last log line about a window end that could not be saved

	// While JOBS is full: full is set by a refusal and cleared by the next stored batch;
	// window is how many held batches the next round may send (0: no limit, JOBS has room).
	full        bool
	fullSince   time.Time // start of the episode (first refusal until every held batch is out); zero: none
	window      int
	lastRelease time.Time // last probe or round while full or recovering
	refused     int64     // publishes refused because JOBS is full, for metrics
	lastFullLog time.Time

	marks []mark // watermarks not yet SyncLag old, oldest first (the loop's)

	// The loop's, reused message to message: a message's jobs encoded, and where each is.
	encoded []byte
	lines   []encodedJob
	// sizes is each part's last sealed body (under mu): the next body of that part starts
	// with room for about as much, instead of growing to it by doubling.
	sizes map[part]int

	wake    chan struct{}
	stop    chan struct{}
	closing sync.Once
	done    chan struct{}
}

// mark is a watermark and when the publisher reached it.
type mark struct {
	at time.Time
	wm int64
}

// window is the jobs of a run of messages, one batch per lane partition.
type window struct {
	first   int64 // first message id with a job (0: none yet)
	through int64 // the window's end: its last message id
	started time.Time
	jobs    int
	parts   map[part]*batchBody

	// once sealed
	msgs      []*nats.Msg
	left      int // batches not yet stored
	saved     bool
	saving    bool
	published bool
}

type part struct {
	lane string
	n    int
}

type batchBody struct {
	data []byte
	n    int
}

// encodedJob is one job of a message: its part, and its line in Publisher.encoded.
type encodedJob struct {
	at         part
	start, end int
}

// bodyCap is the room a new body of part at starts with: a quarter more than its last one,
// within a batch's bound, and at least need.
func (p *Publisher) bodyCap(at part, need int) int {
	c := p.sizes[at]
	c = min(c+c/4, schema.BatchMaxBytes)
	return max(c, need)
}

// line is one partition's batches: the head is in flight, the rest wait for it.
type line struct {
	waiting []*nats.Msg
}

// New creates a publisher. It is a commit listener from the start, and publishes once
// started: what it hears before waits.
func New(cfg Config) *Publisher {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.WindowJobs <= 0 {
		cfg.WindowJobs = DefaultWindowJobs
	}
	return &Publisher{
		cfg:      cfg,
		log:      cfg.Log,
		subjects: make(map[string]*line),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Start publishes on its own JetStream context (its ack handlers are the publisher's),
// resuming where the ledger says the last run stopped (nil: from the start, unrecorded).
// The caller then hands over the messages above the ledger's watermark and calls EndReplay.
func (p *Publisher) Start(nc *nats.Conn, ledger Ledger) error {
	p.mu.Lock()
	p.ledger = ledger
	if ledger != nil {
		p.handled, p.replay = ledger.PublishedThrough(), ledger.OutboxCuts()
	}
	p.replayEnd = len(p.replay) == 0
	p.mu.Unlock()
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncAckHandler(p.onAck),
		jetstream.WithPublishAsyncErrHandler(p.onErr),
		jetstream.WithPublishAsyncMaxPending(16384),
		// A publish lost in flight (a cluster's stream leader died, the connection dropped)
		// is retried after this; the duplicate window swallows it if it had been stored.
		jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return err
	}
	p.js = js
	go p.loop()
	return nil
}

// Committed (a store.CommitListener) takes the messages of one commit, in id order. Called
// by the writer: never blocks.
func (p *Publisher) Committed(msgs []store.Committed) {
	p.mu.Lock()
	p.queue = append(p.queue, msgs...)
	p.unhandled += len(msgs)
	p.mu.Unlock()
	p.poke()
}

// EndReplay says every message above the watermark has been enqueued: the persisted window
// ends not reached by a message are closed too.
func (p *Publisher) EndReplay() {
	p.mu.Lock()
	p.replayEnd = true
	p.mu.Unlock()
	p.poke()
}

func (p *Publisher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Watermark is the highest message id whose jobs are all stored by JetStream.
func (p *Publisher) Watermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case len(p.sealed) > 0:
		return p.sealed[0].first - 1
	case p.open.first > 0:
		return p.open.first - 1
	}
	return p.handled
}

// Backlog is the number of jobs not yet stored by JetStream, plus messages not yet handled.
func (p *Publisher) Backlog() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unhandled + p.pending
}

// Published is the number of jobs published so far.
func (p *Publisher) Published() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published
}

// Batches is the number of JOBS messages (batches) published so far.
func (p *Publisher) Batches() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batches
}

// Drain seals the open window at once and waits until every job is stored by JetStream, or
// the timeout.
func (p *Publisher) Drain(timeout time.Duration) bool {
	p.mu.Lock()
	p.flushing = true
	p.mu.Unlock()
	p.poke()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.Backlog() == 0 {
			return true
		}
		select {
		case <-p.js.PublishAsyncComplete():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return p.Backlog() == 0
}

// Close stops the publishing loop and hands its last watermark to the ledger.
func (p *Publisher) Close() {
	if p.js == nil {
		return // never started
	}
	p.closing.Do(func() { close(p.stop) })
	<-p.done
	if p.ledger != nil {
		p.ledger.SetWatermark(p.Watermark()) // a clean stop: JetStream syncs as it stops
	}
}

func (p *Publisher) loop() {
	defer close(p.done)
	retryTick := time.NewTicker(250 * time.Millisecond)
	defer retryTick.Stop()
	windowTimer := time.NewTimer(time.Hour)
	defer windowTimer.Stop()
	var batch []store.Committed
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-retryTick.C:
		case <-windowTimer.C:
		}
		if !p.js.Conn().IsConnected() {
			// NATS is away: visitors' messages are committed and acked regardless, and wait
			// here (and above the persisted watermark) until it is back.
			continue
		}
		now := time.Now()
		p.mu.Lock()
		batch, p.queue = p.queue, batch[:0]
		retry, ready := p.release(now), p.ready
		p.ready = nil
		p.mu.Unlock()
		for _, m := range retry {
			p.transmit(m)
		}
		for _, m := range ready {
			p.send(m)
		}
		for i := range batch {
			p.add(&batch[i], now)
		}
		clear(batch)
		if wait := p.closeWindows(now); wait > 0 {
			windowTimer.Reset(wait)
		}
		p.saveCuts()
		p.publishSaved()
		p.handOver(now)
	}
}

// handOver gives the ledger the newest watermark at least SyncLag old.
func (p *Publisher) handOver(now time.Time) {
	if p.ledger == nil {
		return
	}
	wm := p.Watermark()
	if p.cfg.SyncLag <= 0 {
		p.ledger.SetWatermark(wm)
		return
	}
	if n := len(p.marks); n == 0 || p.marks[n-1].wm != wm {
		p.marks = append(p.marks, mark{now, wm})
	}
	i := 0
	for i < len(p.marks) && now.Sub(p.marks[i].at) >= p.cfg.SyncLag {
		i++
	}
	if i > 0 {
		p.ledger.SetWatermark(p.marks[i-1].wm)
		p.marks = p.marks[i-1:] // the one handed over stays: it is the floor until a newer one is old enough
	}
}

// jobs builds the jobs of one message from its committed row and what the edge knows in
// memory now (see Build).
func (p *Publisher) jobs(c *store.Committed) []schema.Job {
	env := Env{Delivery: p.cfg.Targets(c.SiteID)}
	if c.Author == schema.AuthorOperator && p.cfg.VisitorHere != nil {
		env.VisitorHere = p.cfg.VisitorHere(c.ConversationID)
	}
	return build(c, env, p.links)
}

// links are the links of a message that has jobs (build).
func (p *Publisher) links(conversationID int64, file *schema.File) (inboxURL, fileURL string) {
	if p.cfg.InboxURL != nil {
		inboxURL = p.cfg.InboxURL(conversationID)
	}
	if file != nil && p.cfg.Files != nil {
		fileURL = p.cfg.Files.Link(p.cfg.PublicURL, file.ID, time.Now().Add(files.LinkTTL))
	}
	return inboxURL, fileURL
}

// add puts a message's jobs in the open window, closing the window first where a persisted
// end (replay) or a batch's size says it ends before this message.
func (p *Publisher) add(c *store.Committed, now time.Time) {
	for len(p.replay) > 0 && c.MessageID > p.replay[0] {
		p.sealReplayed()
	}
	p.encoded, p.lines = p.encoded[:0], p.lines[:0]
	jobs := p.jobs(c)
	partition := 0
	if len(jobs) > 0 {
		partition = schema.JobPartition(c.SiteID, c.ConversationID)
	}
	for _, job := range jobs {
		start := len(p.encoded)
		p.encoded = schema.AppendJob(p.encoded, &job)
		p.lines = append(p.lines, encodedJob{part{job.Lane, partition}, start, len(p.encoded)})
	}
	lines := p.lines
	if len(p.replay) == 0 && p.open.jobs > 0 {
		for _, l := range lines {
			if b := p.open.parts[l.at]; b != nil && len(b.data)+l.end-l.start+1 > schema.BatchMaxBytes {
				p.seal(p.open.through, false)
				break
			}
		}
	}
	p.mu.Lock()
	w := &p.open
	if len(lines) > 0 {
		if w.parts == nil {
			w.parts = make(map[part]*batchBody)
		}
		if w.first == 0 {
			w.first, w.started = c.MessageID, now
		}
		for _, l := range lines {
			line := p.encoded[l.start:l.end]
			b := w.parts[l.at]
			if b == nil {
				b = &batchBody{data: make([]byte, 0, p.bodyCap(l.at, len(line)+1))}
				w.parts[l.at] = b
			}
			b.data = append(append(b.data, line...), '\n')
			b.n++
		}
		w.jobs += len(lines)
		p.pending += len(lines)
	}
	w.through = c.MessageID
	p.handled = c.MessageID
	p.unhandled--
	p.mu.Unlock()
	if len(p.replay) > 0 && c.MessageID == p.replay[0] {
		p.sealReplayed()
	} else if len(p.replay) == 0 && p.open.jobs >= p.cfg.WindowJobs {
		p.seal(p.open.through, false)
	}
}

// closeWindows seals what is due: the rest of a replay once every replayed message is in,
// and the open window once it is Window old (at once while draining). It returns how long
// until the open window is due (0: nothing open).
func (p *Publisher) closeWindows(now time.Time) time.Duration {
	p.mu.Lock()
	replayEnd, flushing := p.replayEnd && len(p.queue) == 0, p.flushing
	p.mu.Unlock()
	if len(p.replay) > 0 {
		if !replayEnd {
			return 0 // the replayed windows end where they ended: no timer cuts them short
		}
		for len(p.replay) > 0 {
			p.sealReplayed()
		}
	}
	if p.open.jobs == 0 {
		return 0
	}
	due := p.open.started.Add(p.cfg.Window)
	if flushing || !now.Before(due) {
		p.seal(p.open.through, false)
		return 0
	}
	return due.Sub(now)
}

// sealReplayed closes the open window at the next persisted end of the replay.
func (p *Publisher) sealReplayed() {
	p.seal(p.replay[0], true)
	p.replay = p.replay[1:]
}

// seal closes the open window at through and readies its batches; persisted says its end is
// in the store already (a replayed window). A window without jobs needs nothing: the
// watermark passes it.
func (p *Publisher) seal(through int64, persisted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.open
	p.open = window{}
	if w.jobs == 0 {
		return
	}
	w.through = through
	w.saved = persisted || p.ledger == nil
	if p.sizes == nil {
		p.sizes = make(map[part]int)
	}
	for at, b := range w.parts {
		p.sizes[at] = len(b.data)
		m := &nats.Msg{
			Subject: schema.BatchSubject(at.lane, at.n, through),
			Data:    b.data,
			Header: nats.Header{
				jetstream.MsgIDHeader: []string{schema.BatchID(at.lane, at.n, through)},
				schema.HeaderJobs:     []string{strconv.Itoa(b.n)},
			},
		}
		w.msgs = append(w.msgs, m)
	}
	w.parts = nil
	w.left = len(w.msgs)
	p.sealed = append(p.sealed, &w)
}

// saveCuts asks the store to persist the end of every sealed window not yet saved (again,
// after a failure).
func (p *Publisher) saveCuts() {
	p.mu.Lock()
	var todo []*window
	for _, w := range p.sealed {
		if !w.saved && !w.saving {
			w.saving = true
			todo = append(todo, w)
		}
	}
	p.mu.Unlock()
	for _, w := range todo {
		p.ledger.SaveCut(w.through, func(err error) {
			p.mu.Lock()
			w.saving = false
			w.saved = err == nil
			logNow := err != nil && time.Since(p.cutFailed) >= 5*time.Second
			if logNow {
				p.cutFailed = time.Now()
			}
			p.mu.Unlock()
			if logNow {
				p.log.Warn("saving a publish window's end failed; its jobs wait and it is tried again", "through", w.through, "err", err)
			}
			if err == nil {
				p.poke()
			}
		})
	}
}

// publishSaved publishes the batches of saved windows, in window order: a window whose end
// is not saved yet holds the ones after it, or a partition's batches could be stored out of
// order.
func (p *Publisher) publishSaved() {
	p.mu.Lock()
	var out []*nats.Msg
	for _, w := range p.sealed {
		if !w.saved {
			break
		}
		if w.published {
			continue
		}
		w.published = true
		for _, m := range w.msgs {
			key := partitionOf(m.Subject)
			if l := p.subjects[key]; l != nil { // the partition's previous batch is in flight
				l.waiting = append(l.waiting, m)
				continue
			}
			p.subjects[key] = &line{}
			out = append(out, m)
		}
		w.msgs = nil
	}
	p.mu.Unlock()
	for _, m := range out {
		p.send(m)
	}
}

// fullProbe is how often one held job asks a full JOBS for room; fullLogEvery how often the
// log says it is still full.
const (
	fullProbe    = time.Second
	fullLogEvery = time.Minute
)

// release takes the failed publishes to send again now: all of them while JOBS has room; one
// per fullProbe while it is full; then rounds of 1, 2, 4, … per retry tick until none are
// held, so that a JOBS with room for a few jobs refuses a few, not every held one. Called
// with p.mu held.
func (p *Publisher) release(now time.Time) []*nats.Msg {
	n := len(p.retry)
	switch {
	case n == 0:
		p.window = 0
		if !p.full && !p.fullSince.IsZero() {
			p.log.Info("JOBS has room again; every held job is published", "full_for", now.Sub(p.fullSince).Round(time.Second))
			p.fullSince = time.Time{}
		}
		return nil
	case p.full:
		if now.Sub(p.lastRelease) < fullProbe {
			return nil
		}
		n = 1
	case p.window > 0:
		if now.Sub(p.lastRelease) < 250*time.Millisecond {
			return nil
		}
		n = min(n, p.window)
		p.window *= 2
	}
	p.lastRelease = now
	out := p.retry[:n:n]
	p.retry = p.retry[n:]
	if len(p.retry) == 0 {
		p.retry = nil
	}
	return out
}

// send publishes a job, or holds it while JOBS is full or recovering: it would be refused,
// and held jobs go out in the rounds release makes.
func (p *Publisher) send(m *nats.Msg) {
	p.mu.Lock()
	if p.full || p.window > 0 {
		p.retry = append(p.retry, m)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.transmit(m)
}

func (p *Publisher) transmit(m *nats.Msg) {
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		p.onErr(p.js, m, err)
		return
	}
	n, _ := strconv.Atoi(m.Header.Get(schema.HeaderJobs))
	p.mu.Lock()
	p.published += int64(n)
	p.batches++
	p.mu.Unlock()
}

func (p *Publisher) onAck(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
	through, ok := schema.BatchThrough(m.Header.Get(jetstream.MsgIDHeader))
	if !ok {
		return
	}
	n, _ := strconv.Atoi(m.Header.Get(schema.HeaderJobs))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.full { // there was room for this one: release the held batches
		p.full = false
		p.poke()
	}
	// The partition's next batch may go. The loop sends it: publishing from this callback
	// could block on the in-flight limit while acks wait for this very goroutine.
	if l := p.subjects[partitionOf(m.Subject)]; l != nil {
		if len(l.waiting) == 0 {
			delete(p.subjects, partitionOf(m.Subject))
		} else {
			p.ready = append(p.ready, l.waiting[0])
			l.waiting = l.waiting[1:]
			p.poke()
		}
	}
	for _, w := range p.sealed {
		if w.through == through {
			w.left--
			p.pending -= n
			break
		}
	}
	// Pop every window at the head whose batches are all stored.
	i := 0
	for i < len(p.sealed) && p.sealed[i].left == 0 {
		p.sealed[i] = nil
		i++
	}
	p.sealed = p.sealed[i:]
}

// onErr re-queues a publish that failed (no stream yet, NATS restarting, ack timeout). It
// stays its partition's batch in flight, so nothing overtakes it. The watermark does not pass it,
// so it is published again after a crash too.
// It logs once per 5 s at most, with the count: an outage fails every job, and one line each
// would flood the log.
func (p *Publisher) onErr(_ jetstream.JetStream, m *nats.Msg, err error) {
	p.mu.Lock()
	p.retry = append(p.retry, &nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header})
	if StreamFull(err) {
		p.refused++
		now := time.Now()
		first := p.fullSince.IsZero()
		p.full, p.window = true, 1
		if first {
			p.fullSince = now
		}
		logNow := first || now.Sub(p.lastFullLog) >= fullLogEvery
		if logNow {
			p.lastFullLog = now
		}
		held, since := len(p.retry), p.fullSince
		p.mu.Unlock()
		if logNow {
			p.log.Warn("JOBS is full: new jobs are kept (visitors still get acks) and published when workers make room; see ops/RUNBOOK.md \"Disk budget\"",
				"held", held, "full_for", now.Sub(since).Round(time.Second), "err", err)
		}
		return
	}
	p.failed++
	now := time.Now()
	var n int
	if now.Sub(p.lastLog) >= 5*time.Second {
		n, p.failed, p.lastLog = p.failed, 0, now
	}
	p.mu.Unlock()
	if n > 0 {
		p.log.Warn("publishing jobs failed; they are retried", "failed", n, "last_job", m.Header.Get(jetstream.MsgIDHeader), "err", err)
	}
}

// StreamFull reports whether JetStream refused a publish because the stream is at its byte
// (or message) budget and discards new messages.
func StreamFull(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == errCodeStoreFailed &&
		(strings.Contains(api.Description, "maximum bytes") || strings.Contains(api.Description, "maximum messages"))
}

// errCodeStoreFailed is nats-server's JSStreamStoreFailedF, what a full DiscardNew stream
// answers a publish with ("maximum bytes exceeded"); nats.go has no name for it.
const errCodeStoreFailed jetstream.ErrorCode = 10077

// Full reports whether JOBS is refusing jobs for want of room and the publisher holds them.
func (p *Publisher) Full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.full
}

// Refused is the number of publishes JOBS refused for want of room.
func (p *Publisher) Refused() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// partitionOf is a batch subject's partition, "jobs.<lane>.<partition>".
func partitionOf(subject string) string {
	if i := strings.LastIndex(subject, ".w."); i >= 0 {
		return subject[:i]
	}
	return subject
}
