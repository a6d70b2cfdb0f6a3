// Package results records what workers report on the RESULTS stream: delivery state per
// message and target, and the Slack and Discord threads of each conversation (to route replies from there).
// The edge stays the only SQLite writer; workers never open the database.
package results

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
)

const (
	maxBatch = 512 // messages; each holds a worker's results of a few milliseconds
	// maxWait is how long the recorder collects results before committing them (a commit per
	// result costs the edge dearly: bench/comments.md); the inbox shows a delivery state at
	// most this much later.
	maxWait = 100 * time.Millisecond
)

// Recorder consumes RESULTS with a durable consumer and writes results in batches. A result
// is applied only when it matches what the edge published (see check.go); anything else is
// refused, counted (spookat_results_rejected_total{reason}) and logged once a minute per
// reason, never written.
type Recorder struct {
	Store   *store.Store
	Sites   *sites.Registry // the delivery targets each site has
	Metrics *metrics.Set
	Log     *slog.Logger
	// OnRecorded, if set, is called after each batch is committed (live delivery states), with
	// each result's status and attempts replaced by what is now stored.
	OnRecorded func([]schema.Result)
	// Origins, if set, answers the origin check of recent messages without a query.
	Origins *Origins
	// OnTranscript, if set, hears the end of each transcript email a visitor asked for:
	// delivered, or dead (it will not be tried again), after the batch is committed.
	OnTranscript func(conversationID int64, status schema.DeliveryStatus)
	// OnInvite, if set, hears that an invitation of the site changed its email's status.
	OnInvite func(siteID int64)

	logs    logLimit
	threads map[threadOf]struct{} // conversations whose Slack or Discord thread is stored (read in the writer's transaction, added to by Run after its commit)
	spare   *batchBufs            // Run's, for the next batch (nil: make new ones)
}

// batchBufs are one batch's buffers: its results and what was stored of each; the messages'
// results among them, as the store records them; the threads the batch stores (known stored
// once its commit holds them). Reused batch to batch, unless a write outlived its call (the
// store may still run a transaction whose caller stopped waiting: it keeps them then).
type batchBufs struct {
	results    []schema.Result
	stored     []state
	deliveries []*schema.Result
	thread     []bool
	at         []int
	recorded   []store.Recorded
	threads    map[threadOf]struct{}
}

// state is what the store holds of a result once its batch is written.
type state struct {
	status     schema.DeliveryStatus
	attempts   int
	rejected   string
	transcript bool // the email of a transcript the visitor asked for
	invite     bool // the email of an invitation to a site's team
	erasure    bool // the webhook of an erasure
}

type threadOf struct {
	target       string
	conversation int64
}

// maxThreads bounds the set of conversations known to have their Slack thread stored; past
// it the set starts again (a miss costs one UPDATE that changes nothing).
const maxThreads = 100_000

// Run consumes until ctx is done. Each message is acked only after the batch holding it is
// committed, so a crash re-delivers them; recording a result twice is harmless.
//
// Acks are explicit, one per message. An AckAll of a batch's last message also acks any
// earlier delivery that never arrived (lost on a dropped connection, a cluster node dying):
// those results would be lost, never redelivered.
func (r *Recorder) Run(ctx context.Context, js jetstream.JetStream) error {
	cfg := jetstream.ConsumerConfig{
		Durable:       schema.ConsumerEdgeResults,
		Description:   "the edge records delivery results in SQLite",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 20000,
		FilterSubject: "results.>",
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, schema.StreamResults, cfg)
	if err != nil {
		// An edge before this one made it AckAll, which a consumer cannot change: make it
		// again, starting after what the old one had recorded.
		old, ierr := js.Consumer(ctx, schema.StreamResults, schema.ConsumerEdgeResults)
		if ierr != nil || old.CachedInfo().Config.AckPolicy == cfg.AckPolicy {
			return err
		}
		floor := old.CachedInfo().AckFloor.Stream
		if err := js.DeleteConsumer(ctx, schema.StreamResults, schema.ConsumerEdgeResults); err != nil {
			return err
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, floor+1
		if cons, err = js.CreateOrUpdateConsumer(ctx, schema.StreamResults, cfg); err != nil {
			return err
		}
		r.Log.Info("edge-results made again with explicit acks", "from_seq", floor+1)
	}
	in := make(chan jetstream.Msg, maxBatch*2)
	cc, err := cons.Consume(func(m jetstream.Msg) { in <- m }, jetstream.PullMaxMessages(maxBatch))
	if err != nil {
		return err
	}
	defer cc.Drain()
	batch := make([]jetstream.Msg, 0, maxBatch)
	timer := time.NewTimer(maxWait)
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-in:
			batch = append(batch[:0], m)
		}
		timer.Reset(maxWait)
	collect:
		for len(batch) < maxBatch {
			select {
			case m := <-in:
				batch = append(batch, m)
			case <-timer.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		r.record(ctx, batch)
	}
}

func (r *Recorder) record(ctx context.Context, batch []jetstream.Msg) {
	b := r.spare
	if b == nil {
		b = &batchBufs{threads: make(map[threadOf]struct{})}
	}
	r.spare = nil
	results := b.results[:0]
	for _, m := range batch {
		results = schema.DecodeResults(results, m.Data(), func(line []byte, err error) {
			r.reject(RejectMalformed, m.Subject(), nil, err.Error())
		})
	}
	b.results = results
	stored := slices.Grow(b.stored[:0], len(results))[:len(results)]
	b.stored = stored
	giveBack := func() {
		// Kept for the next batch, without what this one's strings point to.
		clear(b.results)
		clear(b.deliveries)
		r.spare = b
	}
	err := r.Store.Write(ctx, func(tx *store.Tx) error {
		deliveries, thread, at := b.deliveries[:0], b.thread[:0], b.at[:0] // a commit tried again runs this again
		clear(b.threads)
		for i := range results {
			res := &results[i]
			stored[i] = state{}
			if reason := checkShape(res); reason != "" {
				stored[i].rejected = reason
				continue
			}
			if res.Erasure != "" || res.Fetch != "" || res.Notice != "" { // an erasure's webhook, a fetch, a notice: nothing of it is kept
				stored[i] = state{status: res.Status, attempts: res.Attempts, erasure: true}
				if res.Fetch != "" && res.Status == schema.StatusDead {
					r.Log.Warn("a file posted in Slack could not be fetched", "site", res.SiteID, "conversation", res.ConversationID, "err", res.Error)
				}
				continue
			}
			if res.InviteID != 0 {
				found, err := tx.RecordInviteDelivery(res)
				if err != nil {
					return err
				}
				if !found {
					stored[i].rejected = RejectInvite
					continue
				}
				stored[i] = state{status: res.Status, attempts: res.Attempts, invite: true}
				continue
			}
			o, found := r.Origins.Get(res.MessageID)
			if !found {
				var err error
				if o, found, err = tx.MessageOrigin(res.MessageID); err != nil {
					return err
				}
			}
			var d *schema.SiteDelivery
			if s := r.Sites.ByID(res.SiteID); s != nil {
				d = s.Delivery
			}
			if reason := checkOrigin(res, o, found, d); reason != "" {
				stored[i].rejected = reason
				continue
			}
			th := threadOf{res.Target, res.ConversationID}
			_, known := r.threads[th]
			if _, now := b.threads[th]; now {
				known = true // an earlier result of this batch stores it
			} else if res.ThreadID != "" && !known {
				b.threads[th] = struct{}{}
			}
			deliveries = append(deliveries, res)
			thread = append(thread, !known)
			at = append(at, i)
			stored[i].transcript = o.Kind == schema.KindTranscript && res.Target == schema.TargetEmail
		}
		// The messages' results together, in order: first attempts by rows (store.RecordDeliveries).
		recorded := slices.Grow(b.recorded[:0], len(deliveries))[:len(deliveries)]
		b.deliveries, b.thread, b.at, b.recorded = deliveries, thread, at, recorded
		if err := tx.RecordDeliveries(deliveries, thread, recorded); err != nil {
			return err
		}
		for k, rec := range recorded {
			stored[at[k]].status, stored[at[k]].attempts = rec.Status, rec.Attempts
		}
		return nil
	})
	if err != nil {
		// Not acked: JetStream redelivers the batch after AckWait.
		r.Log.Error("record results; will be redelivered", "n", len(results), "err", err)
		if ctx.Err() == nil {
			giveBack()
		}
		return
	}
	defer giveBack()
	// Known stored only now that the commit holds them: a failed batch stores them again.
	for th := range b.threads {
		if r.threads == nil || len(r.threads) >= maxThreads {
			r.threads = make(map[threadOf]struct{})
		}
		r.threads[th] = struct{}{}
	}
	for _, m := range batch {
		if err := m.Ack(); err != nil {
			r.Log.Warn("ack results", "err", err)
			break
		}
	}
	accepted := results[:0]
	for i := range results {
		if reason := stored[i].rejected; reason != "" {
			r.reject(reason, "", &results[i], "")
			continue
		}
		r.Metrics.ResultsRecords.WithLabelValues(results[i].Target, string(results[i].Status)).Inc()
		if stored[i].invite || stored[i].erasure {
			if stored[i].invite && r.OnInvite != nil {
				r.OnInvite(results[i].SiteID)
			}
			continue // not a message's delivery: the inbox's delivery events are of messages
		}
		if st := stored[i].status; stored[i].transcript && r.OnTranscript != nil && (st == schema.StatusDelivered || st == schema.StatusDead) {
			r.OnTranscript(results[i].ConversationID, st)
		}
		// The live view shows what is stored: a late "retrying" stays "delivered".
		results[i].Status, results[i].Attempts = stored[i].status, stored[i].attempts
		accepted = append(accepted, results[i])
	}
	if r.OnRecorded != nil && len(accepted) > 0 {
		r.OnRecorded(accepted)
	}
}

// reject counts a refused result and logs it, once a minute per reason. The log names ids
// only: a forged result's text is not worth a line, nor is a visitor's.
func (r *Recorder) reject(reason, subject string, res *schema.Result, detail string) {
	r.Metrics.ResultsRejected.WithLabelValues(reason).Inc()
	if !r.logs.allow(reason, time.Now()) {
		return
	}
	args := []any{"reason", reason}
	if res != nil {
		args = append(args, "job", res.JobID, "site", res.SiteID, "conversation", res.ConversationID, "message", res.MessageID)
	} else {
		args = append(args, "subject", subject, "err", detail)
	}
	r.Log.Warn("result refused, not recorded (more of this reason within a minute are only counted)", args...)
}
