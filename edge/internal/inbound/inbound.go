// Package inbound records what workers hear from outside, on the INBOUND stream: an
// operator's reply written in a conversation's Discord thread, "/close" and "/reopen" there,
// files posted there, and files posted in its Slack thread (which a fetch job brought in). The edge stays the only SQLite writer: a worker publishes a schema.Inbound on its
// own subject (inbound.<worker id>), the Recorder stores it through the writer as it stores
// Slack's replies, and the message goes live to the visitor and the inbox like any other.
//
// Nothing from outside is trusted for where it goes: the conversation is the site's whose
// recorded Discord thread, or one of whose delivered posts, the event names
// (store.ConversationByDiscord); an event for no conversation of the site is dropped and
// counted. A resend (a gateway replaying after a resume, a worker publishing twice, the
// stream redelivering after a crash) stores nothing new: the message's client id is the
// source's own id. A reply from Discord is never posted back to Discord (schema.Source.Outside).
package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/files"
	"spookat/edge/internal/metrics"
	"spookat/edge/internal/sites"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Outcomes are the labels of spookat_inbound_total.
var Outcomes = []string{Recorded, Duplicate, Unchanged, NotOurs, Refused}

// Outcomes of an inbound event.
const (
	Recorded  = "recorded"  // a message or a status change stored
	Duplicate = "duplicate" // stored before (its source id)
	Unchanged = "unchanged" // a status the conversation had already
	NotOurs   = "not_ours"  // no conversation of the site is in that thread or has that post
	Refused   = "refused"   // malformed, or for a site without Discord replies: never recorded
)

// Recorder consumes INBOUND with a durable consumer, one event at a time (replies are people
// typing: a few a second at most), acking each once it is stored or dropped.
type Recorder struct {
	Store   *store.Store
	Sites   *sites.Registry
	Metrics *metrics.Set
	Log     *slog.Logger
	// Intake stores the files workers fetched (checked as an operator's upload); nil: a
	// file is refused.
	Intake *files.Intake
	// OnOutcome, if set, hears each event's outcome (tests).
	OnOutcome func(in *schema.Inbound, outcome string)

	lastLog time.Time // the last refusal logged (the consumer's goroutine only)
	objects jetstream.ObjectStore
}

// Run consumes until ctx is done.
func (r *Recorder) Run(ctx context.Context, js jetstream.JetStream) error {
	objects, err := js.ObjectStore(ctx, schema.BucketInboundFiles)
	if err != nil {
		return err
	}
	r.objects = objects
	cons, err := js.CreateOrUpdateConsumer(ctx, schema.StreamInbound, jetstream.ConsumerConfig{
		Durable:       schema.ConsumerEdgeInbound,
		Description:   "the edge records what workers heard from outside (Discord replies)",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 1000,
		FilterSubject: "inbound.>",
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if err := r.handle(ctx, m); err != nil {
			// The writer is busy or stopping: the stream delivers it again.
			r.Log.Warn("inbound event not recorded; it comes again", "subject", m.Subject(), "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Drain()
	return nil
}

// handle records one event; an error means try again later (the event stays in the stream).
func (r *Recorder) handle(ctx context.Context, m jetstream.Msg) error {
	var in schema.Inbound
	if err := json.Unmarshal(m.Data(), &in); err != nil {
		r.done(&in, Refused, "not an inbound event: "+err.Error(), m.Subject())
		return nil
	}
	if err := in.Check(); err != nil {
		r.done(&in, Refused, err.Error(), m.Subject())
		return nil
	}
	site := r.Sites.ByID(in.SiteID)
	if site == nil || in.Source == schema.SourceDiscord && site.DiscordBotToken == "" || in.Source == schema.SourceSlack && site.SlackToken == "" {
		r.done(&in, Refused, "the site takes no replies from "+string(in.Source), m.Subject())
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var convID int64
	var found bool
	var err error
	if in.Source == schema.SourceSlack { // a file a fetch job brought: its conversation's Slack thread
		convID, found, err = r.Store.ConversationByThread(ctx, in.SiteID, in.Thread)
	} else {
		convID, found, err = r.Store.ConversationByDiscord(ctx, in.SiteID, in.Thread, in.ReplyTo)
	}
	if err != nil {
		return err
	}
	if !found {
		r.done(&in, NotOurs, "", m.Subject())
		return nil
	}
	if in.Kind != "" {
		changed, err := r.Store.SetStatus(ctx, in.SiteID, convID, in.Kind, in.Author, in.Source)
		if err != nil {
			return err
		}
		r.done(&in, map[bool]string{true: Recorded, false: Unchanged}[changed], "", m.Subject())
		return nil
	}
	var file *store.File
	if in.File != nil {
		var outcome string
		if file, outcome, err = r.takeFile(ctx, site, convID, &in); err != nil {
			return err
		}
		if file == nil {
			r.done(&in, outcome, "the file: "+outcome, m.Subject())
			return nil
		}
	}
	done := make(chan store.MessageResult, 1)
	author := strings.TrimSpace(in.Author)
	if author == "" {
		author = "Support"
	}
	if err := r.Store.SubmitMessage(&store.MessageRequest{
		SiteID: in.SiteID, ConversationID: convID, Author: schema.AuthorOperator, Name: author,
		Text: schema.CleanText(in.Text), Internal: in.Internal, Source: in.Source, ClientID: in.ID, File: file,
		Done: func(res store.MessageResult) { done <- res },
	}); err != nil {
		return err
	}
	select {
	case res := <-done:
		if res.Err != nil {
			if errors.Is(res.Err, store.ErrConversationNotFound) {
				r.done(&in, NotOurs, "", m.Subject()) // erased since it was found
				return nil
			}
			return res.Err
		}
		r.done(&in, map[bool]string{true: Duplicate, false: Recorded}[res.Duplicate], "", m.Subject())
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeFile stores the file an event carries, from INBOUND_FILES, as an operator's upload: the
// site's size limit, quota, disk reserve and type checks. The object is deleted once the file
// is stored or refused. No file and an outcome: an event seen before (its object taken
// then), or a file refused.
func (r *Recorder) takeFile(ctx context.Context, site *sites.Site, convID int64, in *schema.Inbound) (*store.File, string, error) {
	if seen, err := r.Store.HasMessage(ctx, convID, in.Source, in.ID); err != nil || seen {
		_ = r.objects.Delete(ctx, in.File.Object)
		return nil, Duplicate, err
	}
	limit := site.Widget.FileLimit()
	if r.Intake == nil || limit == 0 {
		_ = r.objects.Delete(ctx, in.File.Object)
		return nil, Refused, nil // the site takes no attachments
	}
	data, err := r.objects.GetBytes(ctx, in.File.Object)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, Refused, nil // expired, or never put
	}
	if err != nil {
		return nil, "", err
	}
	// The row names the source as its uploader ("discord", "slack"): no visitor token hashes to that.
	row, p := r.Intake.TakeBytes(ctx, site.ID, limit, in.File.Name, in.File.Type, data, []byte(in.Source))
	if p != nil && p.Code == schema.CodeUnavailable {
		return nil, "", errors.New(p.Message) // the disk or the writer: try again
	}
	_ = r.objects.Delete(ctx, in.File.Object)
	if p != nil {
		r.Log.Info("a file from outside refused", "site", site.ID, "id", in.ID, "why", p.Message)
		return nil, Refused, nil
	}
	return row, "", nil
}

func (r *Recorder) done(in *schema.Inbound, outcome, why, subject string) {
	if r.Metrics != nil {
		r.Metrics.Inbound.WithLabelValues(outcome).Inc()
	}
	// Refusals are a worker's mistake, not a person's: logged once a minute at most.
	if outcome == Refused && time.Since(r.lastLog) > time.Minute {
		r.lastLog = time.Now()
		r.Log.Warn("inbound event refused (once a minute at most; spookat_inbound_total counts them)", "subject", subject, "site", in.SiteID, "id", in.ID, "why", why)
	}
	if r.OnOutcome != nil {
		r.OnOutcome(in, outcome)
	}
}
