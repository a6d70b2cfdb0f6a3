// Package outbox turns committed messages into delivery jobs on the JOBS stream.
//
// The writer hands every commit's messages to the Publisher, which publishes asynchronously
// (the visitor's ack never waits on NATS) with Nats-Msg-Id = the job id. The Publisher keeps a
// watermark: the highest message id such that every job of every message up to it has been
// stored by JetStream (its PubAck came back). The writer persists that watermark in the outbox
// table with its commits. After a crash, the edge re-publishes the jobs of every message above
// the persisted watermark; jobs that had made it are dropped by JetStream's duplicate window.
// This costs no outbox row per message.
//
// Order: JOBS must hold a conversation's jobs in the order of its messages, or a worker posts
// them out of order. Publishing many jobs at once and retrying the ones that fail would break
// that whenever a publish fails and a later one succeeds (a cluster's stream leader dying, a
// timeout), so a subject (lane, site, conversation) has at most one job in flight: the next
// goes out when JetStream has stored the previous one. Conversations proceed in parallel.
//
// A full JOBS (its byte budget reached, workers or Slack away for hours) refuses new jobs. The
// publisher keeps them, above the watermark, and probes for room once a second with one job;
// when one is stored it releases the held jobs in doubling rounds, so a stream that has room
// for a few jobs at a time costs a few refusals, not one per held job every retry.
package outbox

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Targets returns the delivery settings of a site, or nil for an unknown site.
type Targets func(siteID int64) *schema.SiteDelivery

// Config says what jobs a message gets.
type Config struct {
	Targets Targets
	// InboxURL links a conversation in the web inbox (put in every job).
	InboxURL func(conversationID int64) string
	// ReplyEmail returns where to email an operator's reply: the visitor's address when the
	// visitor is not connected and left one, else "".
	ReplyEmail func(conversationID int64) string
	// PublishedThrough is the persisted watermark the publisher starts from.
	PublishedThrough int64
	Log              *slog.Logger
}

// Publisher publishes jobs and tracks the watermark.
type Publisher struct {
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	queue     []store.Committed // handed over by the writer, not yet taken by the loop
	unhandled int               // messages handed over whose jobs are not yet published
	retry     []*nats.Msg       // publishes that failed, to send again
	ready     []*nats.Msg       // next jobs of subjects whose previous job was stored
	subjects  map[string]*line  // subjects with a job in flight
	pending   map[int64]int     // message id → jobs not yet acked by JetStream
	order     []int64           // message ids with pending jobs, ascending
	handled   int64             // highest message id taken from the queue
	published int64             // jobs published, for metrics
	failed    int               // publishes failed since the last log line about them
	lastLog   time.Time

	// While JOBS is full: full is set by a refusal and cleared by the next stored job; window
	// is how many held jobs the next round may send (0: no limit, JOBS has room).
	full        bool
	fullSince   time.Time // start of the episode (first refusal until every held job is out); zero: none
	window      int
	lastRelease time.Time // last probe or round while full or recovering
	refused     int64     // publishes refused because JOBS is full, for metrics
	lastFullLog time.Time

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// line is one subject's jobs: the head is in flight, the rest wait for it.
type line struct {
	waiting []*nats.Msg
}

// New creates a publisher on its own JetStream context (its ack handlers are the publisher's).
func New(nc *nats.Conn, cfg Config) (*Publisher, error) {
	p := &Publisher{
		cfg:      cfg,
		log:      cfg.Log,
		pending:  make(map[int64]int),
		subjects: make(map[string]*line),
		handled:  cfg.PublishedThrough,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncAckHandler(p.onAck),
		jetstream.WithPublishAsyncErrHandler(p.onErr),
		jetstream.WithPublishAsyncMaxPending(16384),
		// A publish lost in flight (a cluster's stream leader died, the connection dropped)
		// is retried after this; the duplicate window swallows it if it had been stored.
		jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	p.js = js
	go p.loop()
	return p, nil
}

// Enqueue takes the messages of one commit, in id order. Called by the writer: never blocks.
func (p *Publisher) Enqueue(msgs []store.Committed) {
	p.mu.Lock()
	p.queue = append(p.queue, msgs...)
	p.unhandled += len(msgs)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Watermark is the highest message id whose jobs are all stored by JetStream.
func (p *Publisher) Watermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.order) > 0 {
		return p.order[0] - 1
	}
	return p.handled
}

// Backlog is the number of jobs published and not yet acked, plus messages not yet handled.
func (p *Publisher) Backlog() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.unhandled
	for _, c := range p.pending {
		n += c
	}
	return n
}

// Published is the number of jobs published so far.
func (p *Publisher) Published() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.published
}

// Drain waits until every queued job is acked by JetStream, or the timeout.
func (p *Publisher) Drain(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.Backlog() == 0 {
			return true
		}
		select {
		case <-p.js.PublishAsyncComplete():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return p.Backlog() == 0
}

// Close stops the publishing loop.
func (p *Publisher) Close() {
	close(p.stop)
	<-p.done
}

func (p *Publisher) loop() {
	defer close(p.done)
	retryTick := time.NewTicker(250 * time.Millisecond)
	defer retryTick.Stop()
	var batch []store.Committed
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-retryTick.C:
		}
		if !p.js.Conn().IsConnected() {
			// NATS is away: visitors' messages are committed and acked regardless, and wait
			// here (and above the persisted watermark) until it is back.
			continue
		}
		p.mu.Lock()
		batch, p.queue = p.queue, batch[:0]
		retry, ready := p.release(time.Now()), p.ready
		p.ready = nil
		p.mu.Unlock()
		for _, m := range retry {
			p.transmit(m)
		}
		for _, m := range ready {
			p.send(m)
		}
		for i := range batch {
			p.publish(&batch[i])
		}
		clear(batch)
	}
}

// publish sends the jobs of one message. A message without targets only moves the watermark.
func (p *Publisher) publish(c *store.Committed) {
	var targets []string
	replyTo := ""
	if !c.Internal {
		if d := p.cfg.Targets(c.SiteID); d != nil {
			targets = d.Targets(c.First && c.Author == schema.AuthorVisitor)
		}
		if c.Source == schema.SourceSlack {
			targets = withoutSlack(targets) // a reply from Slack is never posted back to Slack
		}
		if c.Author == schema.AuthorOperator && p.cfg.ReplyEmail != nil {
			if replyTo = p.cfg.ReplyEmail(c.ConversationID); replyTo != "" {
				targets = append(targets, schema.TargetEmail)
			}
		}
	}
	p.mu.Lock()
	if len(targets) > 0 {
		p.pending[c.MessageID] = len(targets)
		p.order = append(p.order, c.MessageID)
	}
	p.handled = c.MessageID
	p.unhandled--
	p.mu.Unlock()
	for _, target := range targets {
		job := schema.Job{
			ID:             schema.JobID(c.MessageID, target),
			Lane:           schema.LaneOf(target),
			Target:         target,
			SiteID:         c.SiteID,
			ConversationID: c.ConversationID,
			MessageID:      c.MessageID,
			Author:         c.Author,
			Name:           c.Name,
			Text:           c.Text,
			CreatedAt:      time.UnixMilli(c.CreatedAt).UTC(),
			First:          c.First,
		}
		if p.cfg.InboxURL != nil {
			job.InboxURL = p.cfg.InboxURL(c.ConversationID)
		}
		if target == schema.TargetEmail {
			job.To = replyTo
		}
		body, err := json.Marshal(&job)
		if err != nil { // cannot happen with these field types; never drop silently
			p.log.Error("encode job", "job", job.ID, "err", err)
			continue
		}
		m := &nats.Msg{
			Subject: schema.JobSubject(job.Lane, c.SiteID, c.ConversationID),
			Data:    body,
			Header:  nats.Header{jetstream.MsgIDHeader: []string{job.ID}},
		}
		p.mu.Lock()
		l := p.subjects[m.Subject]
		if l != nil { // the subject's previous job is in flight: this one waits for it
			l.waiting = append(l.waiting, m)
			p.mu.Unlock()
			continue
		}
		p.subjects[m.Subject] = &line{}
		p.mu.Unlock()
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
	p.mu.Lock()
	p.published++
	p.mu.Unlock()
}

func (p *Publisher) onAck(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
	id, ok := messageID(m.Header.Get(jetstream.MsgIDHeader))
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.full { // there was room for this one: release the held jobs
		p.full = false
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	// The subject's next job may go. The loop sends it: publishing from this callback could
	// block on the in-flight limit while acks wait for this very goroutine.
	if l := p.subjects[m.Subject]; l != nil {
		if len(l.waiting) == 0 {
			delete(p.subjects, m.Subject)
		} else {
			p.ready = append(p.ready, l.waiting[0])
			l.waiting = l.waiting[1:]
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
	n, ok := p.pending[id]
	if !ok {
		return
	}
	if n > 1 {
		p.pending[id] = n - 1
		return
	}
	delete(p.pending, id)
	// Pop every message at the head whose jobs are all stored.
	i := 0
	for i < len(p.order) {
		if _, still := p.pending[p.order[i]]; still {
			break
		}
		i++
	}
	p.order = p.order[i:]
}

// onErr re-queues a publish that failed (no stream yet, NATS restarting, ack timeout). It
// stays its subject's job in flight, so nothing overtakes it. The watermark does not pass it,
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

// messageID parses the message id out of a job id "m<id>.<target>".
func messageID(jobID string) (int64, bool) {
	s, ok := strings.CutPrefix(jobID, "m")
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, ".")
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// withoutSlack drops the Slack target (in place: Targets returns a fresh slice).
func withoutSlack(targets []string) []string {
	out := targets[:0]
	for _, t := range targets {
		if t != schema.TargetSlack {
			out = append(out, t)
		}
	}
	return out
}
