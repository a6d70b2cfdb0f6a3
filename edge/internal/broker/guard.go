package broker

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// ConsumerAdvisories is where JetStream says a consumer was created, by stream and name.
const ConsumerAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.CREATED.>"

// GuardConsumers removes the consumers that keep refuses, as soon as JetStream says they were
// made, and those already there at start and every minute after. Permissions check the API
// subject of a consumer's creation, never its body: a worker that may create the ephemeral
// consumers of its bucket watches may also create a durable, or a push consumer delivering
// somewhere else; the edge takes such consumers away at once. removed hears of each.
func (b *Broker) GuardConsumers(ctx context.Context, js jetstream.JetStream, keep func(stream string, c *jetstream.ConsumerInfo) bool,
	removed func(stream, name string)) {
	check := func(stream, name string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := js.Stream(cctx, stream)
		if err != nil {
			return
		}
		var info *jetstream.ConsumerInfo
		if c, err := s.Consumer(cctx, name); err == nil {
			info = c.CachedInfo()
		} else if errors.Is(err, jetstream.ErrNotPullConsumer) {
			if pc, err := s.PushConsumer(cctx, name); err == nil {
				info = pc.CachedInfo()
			}
		}
		if info == nil || keep(stream, info) { // gone already, or as it should be
			return
		}
		if err := s.DeleteConsumer(cctx, name); err == nil && removed != nil {
			removed(stream, name)
		}
	}
	sweep := func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for name := range js.StreamNames(sctx).Name() {
			s, err := js.Stream(sctx, name)
			if err != nil {
				continue
			}
			for c := range s.ListConsumers(sctx).Info() {
				if !keep(name, c) {
					if err := s.DeleteConsumer(sctx, c.Name); err == nil && removed != nil {
						removed(name, c.Name)
					}
				}
			}
		}
	}
	created := make(chan [2]string, 256)
	sub, err := b.NC.Subscribe(ConsumerAdvisories, func(m *nats.Msg) {
		// $JS.EVENT.ADVISORY.CONSUMER.CREATED.<stream>.<consumer>
		t := strings.Split(m.Subject, ".")
		if len(t) != 7 {
			return
		}
		select {
		case created <- [2]string{t[5], t[6]}:
		default: // a burst: the minute's sweep takes the rest
		}
	})
	if err != nil {
		b.opts.Log.Warn("consumer advisories not watched; only the minute's sweep removes foreign consumers", "err", err)
	} else {
		defer sub.Unsubscribe()
	}
	sweep()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-created:
			check(c[0], c[1])
		case <-t.C:
			sweep()
		}
	}
}

// ExpectedConsumer is the edge's rule of which consumers may be: on JOBS those it provisions
// (one a lane's shard), on RESULTS its own, on the buckets the ephemeral watches that deliver
// to their creator's inbox; nothing else, anywhere in the account.
func ExpectedConsumer(stream string, c *jetstream.ConsumerInfo) bool {
	switch {
	case stream == schema.StreamJobs:
		for _, lane := range []string{schema.LaneChat, schema.LaneWebhook, schema.LaneEmail} {
			for shard := range schema.JobShards(lane) {
				if c.Name == schema.JobConsumer(lane, shard) {
					return true
				}
			}
		}
		return false
	case stream == schema.StreamResults:
		return c.Name == schema.ConsumerEdgeResults
	case stream == schema.StreamInbound:
		return c.Name == schema.ConsumerEdgeInbound
	case strings.HasPrefix(stream, "KV_"), stream == "OBJ_"+schema.BucketInboundFiles: // watches, the edge's reads of files

		return c.Config.Durable == "" && strings.HasPrefix(c.Config.DeliverSubject, "_INBOX_")
	}
	return false
}
