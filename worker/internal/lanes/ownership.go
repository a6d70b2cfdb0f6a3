package lanes

// Ownership: a shard is acquired and released as the workers change, held back after a
// takeover until the previous owner's jobs are settled, and fed by its consumer.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// SetWant records whether this worker should own the shard and moves towards it.
func (s *Partition) SetWant(ctx context.Context, want bool, drainTimeout time.Duration) {
	l := s.lane
	l.mu.Lock()
	s.want = want
	l.mu.Unlock()
	go s.reconcile(ctx, drainTimeout)
}

// SetWantSync is SetWant that returns once the shard got there (used at stop).
func (s *Partition) SetWantSync(want bool, drainTimeout time.Duration) {
	l := s.lane
	l.mu.Lock()
	s.want = want
	l.mu.Unlock()
	s.reconcile(context.Background(), drainTimeout)
}

func (s *Partition) reconcile(ctx context.Context, drainTimeout time.Duration) {
	s.op.Lock()
	defer s.op.Unlock()
	l := s.lane
	l.mu.Lock()
	want, owned := s.want, s.owned
	l.mu.Unlock()
	switch {
	case want && !owned:
		if err := s.acquire(ctx); err != nil && ctx.Err() == nil {
			// A cluster electing the consumer's leader answers nothing for seconds: try
			// again, or the partition would wait for the next change of members.
			l.env.Log.Warn("acquire shard; trying again in 1s", "consumer", s.Name, "err", err)
			time.AfterFunc(time.Second, func() { s.reconcile(ctx, drainTimeout) })
		}
	case !want && owned:
		s.release(drainTimeout)
	}
}

func (s *Partition) acquire(ctx context.Context) error {
	l := s.lane
	cons, err := l.env.Stream.Consumer(ctx, s.Name) // a fresh handle: no stale pin id
	if err != nil {
		return err
	}
	l.mu.Lock()
	s.gen++
	gen := s.gen
	s.owned, s.cons, s.pinID, s.lastSeq = true, cons, "", 0
	l.mu.Unlock()
	cc, err := cons.Consume(func(m jetstream.Msg) { l.receive(s, gen, m) },
		jetstream.PullPriorityGroup(schema.JobPriorityGroup),
		jetstream.PullExpiry(l.cfg.PullExpiry),
		jetstream.PullMaxMessages(l.cfg.PullBatch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				l.env.Log.Debug("consume", "consumer", s.Name, "err", err)
			}
		}))
	if err != nil {
		l.mu.Lock()
		s.owned = false
		l.mu.Unlock()
		return err
	}
	l.mu.Lock()
	s.cc = cc
	l.mu.Unlock()
	l.env.M.Partitions.WithLabelValues(l.cfg.Lane).Inc()
	return nil
}

// release hands the shard over: stop pulling, let in-flight sends finish and finish the
// batches it has started (bounded), give the messages not started back (nak, in order), wait
// for acks to be out, then unpin so the next owner is pinned at once instead of after the
// pinned TTL.
func (s *Partition) release(drainTimeout time.Duration) {
	l := s.lane
	l.mu.Lock()
	s.owned = false
	s.handing = true
	s.gen++
	cc := s.cc
	s.cc = nil
	if s.waiting > 0 {
		l.room.Broadcast() // its receive gives its message back and returns, so Drain can end
	}
	l.mu.Unlock()
	timer := time.NewTimer(drainTimeout)
	defer timer.Stop()
	if cc != nil {
		// Drain, not Stop: messages already on their way to us are received (and given back
		// by receive, as the generation changed) instead of dropped, where they would hold the
		// next owner back for a whole ack wait.
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-timer.C:
			timer.Reset(0)
		}
	}
	l.mu.Lock()
	var drained chan struct{}
	if s.inflight > 0 || s.partial > 0 {
		drained = make(chan struct{})
		s.drained = drained
		for c := range s.convs {
			l.kick(c) // the started batches' conversations go on
		}
	}
	l.mu.Unlock()
	if drained != nil {
		select {
		case <-drained:
		case <-timer.C:
			l.env.Log.Warn("release: in-flight deliveries or started batches still running; their delivered jobs may be repeated by the next owner", "consumer", s.Name)
		}
	}
	// Give back what was not started, in stream order.
	l.mu.Lock()
	s.handing = false
	s.drained = nil
	var back []*item
	for c := range s.convs {
		if c.busy {
			continue
		}
		back = append(back, c.items...)
	}
	msgs := l.takeBack(s, back)
	l.queuedG.Set(float64(l.held))
	l.mu.Unlock()
	giveBack(msgs)
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	l.env.Out.Flush(ctx)
	if err := l.env.Stream.UnpinConsumer(ctx, s.Name, schema.JobPriorityGroup); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		l.env.Log.Debug("unpin", "consumer", s.Name, "err", err)
	}
	l.env.M.Partitions.WithLabelValues(l.cfg.Lane).Dec()
}

// settled signals release once nothing is in flight and no started batch is unfinished.
// Lock held.
func (s *Partition) settled() {
	if s.drained != nil && s.inflight == 0 && s.partial == 0 {
		close(s.drained)
		s.drained = nil
	}
}

// receive is the Consume callback of a shard (one goroutine per shard, in delivery order).
func (l *Lane) receive(s *Partition, gen int, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		_ = m.Term()
		return
	}
	d := &delivery{shard: s, msg: m, seq: meta.Sequence.Stream, touched: time.Now(), size: len(m.Data())}
	attempts := int(meta.NumDelivered) - 1
	// Handed out before (its worker may have delivered it and lost the ack: a crash, a
	// partition handed over mid-batch), or stored before an edge started after a crash or
	// power cut, which may have taken JetStream's record of the delivery with it.
	maybeRepeat := attempts > 0 || meta.Timestamp.Before(l.env.Sites.UncleanStart())
	var bad []*item
	schema.SplitJobs(m.Headers().Get(schema.HeaderJobs) != "", m.Data(), func(line []byte) {
		it := &item{d: d, data: line, attempts: attempts, pos: pos(d.seq, len(d.items))}
		d.items = append(d.items, it)
		if err := schema.DecodeJob(line, &it.job); err != nil || it.job.ID == "" {
			// Not a job: nothing can deliver it. Keep it in DEAD for a human.
			bad = append(bad, it)
		}
		if maybeRepeat {
			it.job.MaybeRepeat = true
		}
	})
	d.left = len(d.items)
	if len(d.items) == 0 || len(d.items) > maxBatchJobs {
		_ = m.Term()
		l.env.Log.Warn("JOBS message without jobs or with too many; terminated", "consumer", s.Name, "seq", d.seq, "jobs", len(d.items))
		return
	}
	pin := m.Headers().Get("Nats-Pin-Id")

	l.mu.Lock()
	// A full partition takes nothing more until what it holds shrinks. Waiting here, in the
	// Consume callback, stops the pulls too: the client asks for more only as its callback
	// returns, so JetStream keeps the rest. While tainted it does not wait: the jobs that
	// clear the taint (an earlier owner's, given back) may be the next to arrive.
	mustWait := func() bool { return s.full() && !s.tainted && s.gen == gen && s.owned }
	if mustWait() {
		l.fullG.Inc()
		s.waiting++
		for mustWait() {
			l.room.Wait()
		}
		s.waiting--
		l.fullG.Dec()
	}
	if s.gen != gen || !s.owned {
		l.mu.Unlock()
		_ = m.Nak() // handed over meanwhile; the next owner takes it
		return
	}
	// A gap in the consumer's delivery sequence is a delivery lost on its way to us (the
	// connection dropped, a cluster node died): JetStream counts that message as ours and
	// will send it again only after its ack wait, so the jobs after it must not overtake it.
	// Every delivery counts, redeliveries of what we hold too.
	cseq := meta.Sequence.Consumer
	gap := s.lastSeq != 0 && cseq > s.lastSeq+1
	s.lastSeq = max(s.lastSeq, cseq)
	if old := s.seen[d.seq]; old != nil {
		// Redelivered while we still hold it (ack wait passed): keep one copy, fresh handle.
		old.msg, old.touched = m, d.touched
		if gap {
			l.taint(s, gen)
		}
		l.mu.Unlock()
		return
	}
	if pin != s.pinID || gap {
		// Newly pinned (jobs the previous owner took may still be out there) or a delivery
		// lost: hold the shard until every job taken is acked or in our hands.
		s.pinID = pin
		l.taint(s, gen)
	}
	s.hold(d)
	for _, it := range d.items {
		if slices.Contains(bad, it) {
			continue
		}
		l.held++
		key := keyOf(&it.job)
		c := l.convs[key]
		if c == nil {
			c = &conv{key: key, shard: s}
			l.convs[key] = c
			s.convs[c] = struct{}{}
		}
		it.c = c
		// Insert in stream order: almost always an append; a redelivery from a previous
		// owner can be older than what we hold.
		i := len(c.items)
		for i > 0 && c.items[i-1].pos > it.pos {
			i--
		}
		c.items = slices.Insert(c.items, i, it)
		l.kick(c)
	}
	l.queuedG.Set(float64(l.held))
	if !l.kaRunning {
		l.kaRunning = true
		go l.keepAlive()
	}
	l.mu.Unlock()
	if len(bad) > 0 {
		l.dead(bad, errors.New("undecodable job"), nil)
	}
}

// taint holds the shard back until checkTaint clears it. Lock held.
func (l *Lane) taint(s *Partition, gen int) {
	s.tainted = true
	if !s.checking {
		s.checking = true
		go l.checkTaint(s, gen)
	}
}

// checkTaint polls the consumer while the shard is held back (only right after a takeover):
// once the consumer's ack-pending count is no more than what we hold, every job taken before
// is done or ours, and sending in stream order keeps each conversation in order.
func (l *Lane) checkTaint(s *Partition, gen int) {
	every := min(max(l.cfg.AckWait/20, 50*time.Millisecond), time.Second)
	for {
		l.mu.Lock()
		cons := s.cons
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := cons.Info(ctx)
		cancel()
		l.mu.Lock()
		if s.gen != gen {
			if s.owned && s.tainted {
				// Released and taken again while we slept: the new ownership is held back
				// too, and this is its only checker (receive starts none while one runs).
				gen = s.gen
				l.mu.Unlock()
				continue
			}
			s.checking = false
			l.mu.Unlock()
			return
		}
		if err == nil && info.NumAckPending <= s.unacked {
			// The count agreed; the stream says it for sure. JOBS keeps only what is not acked:
			// every job of this partition still there, up to the last one we hold, must be in
			// our hands. (The count alone let a partition resume while the dead owner's batch
			// was out: TestOrderAfterKills.)
			held := make(map[uint64]bool, len(s.seen))
			var top uint64
			for seq := range s.seen {
				held[seq] = true
				top = max(top, seq)
			}
			l.mu.Unlock()
			ours, herr := l.ownsHead(s, info.AckFloor.Stream+1, top, held)
			l.mu.Lock()
			if herr != nil || !ours || s.gen != gen {
				l.mu.Unlock()
				time.Sleep(every)
				continue
			}
			s.tainted, s.checking = false, false
			for c := range s.convs {
				l.kick(c)
			}
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		time.Sleep(every)
	}
}

// ownsHead reports whether every job of the shard's partition still in JOBS from sequence
// from up to top is one of held: nothing earlier than what we hold is out elsewhere.
func (l *Lane) ownsHead(s *Partition, from, top uint64, held map[uint64]bool) (bool, error) {
	filter := schema.JobShardFilter(l.cfg.Lane, s.N)
	for seq := from; seq <= top; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := l.env.Stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return true, nil // nothing of the partition left from seq on
		}
		if err != nil {
			return false, err
		}
		if m.Sequence > top {
			return true, nil
		}
		if !held[m.Sequence] {
			return false, nil
		}
		seq = m.Sequence + 1
	}
	return true, nil
}

// keepAlive tells JetStream that held jobs (waiting behind their conversation's head, or for
// a retry) are still being worked on. It runs only while the lane holds jobs.
func (l *Lane) keepAlive() {
	every := max(l.cfg.AckWait/3, 100*time.Millisecond)
	t := time.NewTicker(min(every, time.Second)) // also the check of acks held too long
	defer t.Stop()
	var msgs []jetstream.Msg
	for range t.C {
		now := time.Now()
		l.mu.Lock()
		if l.held == 0 {
			l.kaRunning = false
			l.mu.Unlock()
			return
		}
		msgs = msgs[:0]
		var acks []jetstream.Msg
		for _, s := range l.shards {
			acks = append(acks, s.overdue(now)...)
			for _, d := range s.seen {
				if now.Sub(d.touched) >= every {
					d.touched = now
					msgs = append(msgs, d.msg)
				}
			}
		}
		l.mu.Unlock()
		if len(acks) > 0 {
			l.env.Out.Publish(nil, nil, acks) // after the results already queued
		}
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}
