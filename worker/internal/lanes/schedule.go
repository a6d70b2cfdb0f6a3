package lanes

// Scheduling: which conversation's head goes next, within the lane's in-flight limit, and
// when a waiting one is tried again.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"spookat/schema"
	"spookat/worker/internal/deliver"
)

// kick starts the conversation's head if it can go now. Lock held.
func (l *Lane) kick(c *conv) {
	if c.busy || c.waiting || c.inReady || len(c.items) == 0 || c.shard.tainted {
		return
	}
	if !c.shard.owned && !(c.shard.handing && c.finishesBatch()) {
		return
	}
	if l.inflight >= l.cfg.InFlight {
		c.inReady = true
		l.ready = append(l.ready, c)
		return
	}
	head := c.items[0]
	sender := l.env.Senders[head.job.Target]
	site := l.env.Sites.Peek(head.job.SiteID)
	n := 1
	if g, ok := sender.(deliver.Gate); ok && site != nil {
		wait, limited := g.Wait(site, &head.job)
		if wait > 0 {
			l.wait(c, wait)
			return
		}
		// A fetch (a file to bring in from Slack) is a job of its own, never merged.
		if mg, ok := sender.(deliver.Merger); ok && limited && !head.job.First && head.job.Fetch == nil {
			for n < len(c.items) && n < mg.MergeMax() && !c.items[n].job.First && c.items[n].job.Fetch == nil {
				n++
			}
		}
	}
	batch := slices.Clone(c.items[:n])
	for _, it := range batch {
		it.sending = true
		c.shard.start(it.d)
	}
	c.busy = true
	c.shard.inflight++
	l.inflight++
	l.inflightG.Set(float64(l.inflight))
	l.dispatch(task{c, batch, sender, site})
}

type task struct {
	c      *conv
	batch  []*item
	sender deliver.Sender
	site   *schema.SiteDelivery
}

// dispatch hands a send to an idle runner, or starts one. Runners live on while there is work
// (their stacks are already grown to what an HTTP call needs, where a fresh goroutine per send
// grows its stack each time) and exit after a quiet spell, so an idle lane has none. A runner
// finishing a send takes the first send its outcome starts itself (l.claimed): handing it to
// another runner cost a wake-up of that one and a sleep of this one per post. Lock held.
func (l *Lane) dispatch(t task) {
	if l.claiming && !l.claimed.taken {
		l.claimed = claim{t, true}
		return
	}
	select {
	case l.tasks <- t:
	default:
		go l.runner(t)
	}
}

func (l *Lane) runner(t task) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		if next, ok := l.send(t.c, t.batch, t.sender, t.site); ok {
			t = next
			continue
		}
		idle.Reset(runnerIdle)
		select {
		case t = <-l.tasks:
		case <-idle.C:
			return
		}
	}
}

const runnerIdle = 20 * time.Second

// claim is where dispatch leaves the first send for the runner that called finish.
type claim struct {
	task  task
	taken bool
}

// wait parks a conversation without an in-flight slot. Lock held.
func (l *Lane) wait(c *conv, d time.Duration) {
	c.waiting = true
	time.AfterFunc(d, func() {
		l.mu.Lock()
		c.waiting = false
		l.kick(c)
		l.dropIfIdle(c)
		l.mu.Unlock()
	})
}

// pump fills free slots from the ready queue. Lock held.
func (l *Lane) pump() {
	for l.inflight < l.cfg.InFlight && len(l.ready) > 0 {
		c := l.ready[0]
		l.ready[0] = nil
		l.ready = l.ready[1:]
		c.inReady = false
		l.kick(c)
	}
	if len(l.ready) == 0 {
		l.ready = l.ready[:0:0] // let the backing array go after a burst
	}
}

// send makes one attempt and returns the send its runner goes on with, if its outcome started
// one (see dispatch).
func (l *Lane) send(c *conv, batch []*item, sender deliver.Sender, site *schema.SiteDelivery) (task, bool) {
	start := time.Now()
	deadline := start.Add(l.cfg.SendTimeout)
	var out deliver.Outcome
	if sender == nil {
		out = deliver.Permanent(fmt.Errorf("no sender for target %q", batch[0].job.Target))
	} else {
		if site == nil {
			ctx, cancel := context.WithDeadline(l.sendCtx, deadline)
			var err error
			site, err = l.env.Sites.Get(ctx, batch[0].job.SiteID)
			cancel()
			if err == nil && site == nil {
				err = deliver.ErrNoSite
			}
			if err != nil {
				out = deliver.Fail(err)
			}
		}
		if site != nil && l.env.Sites.Erased(batch[0].job.ConversationID) {
			out = deliver.Outcome{Dropped: true} // a batch is one conversation's
		} else if site != nil {
			jobs := make([]*schema.Job, len(batch))
			for i, it := range batch {
				jobs[i] = &it.job
			}
			out = sender.Send(l.sendCtx, deadline, site, jobs)
		}
	}
	return l.finish(c, batch, out, start)
}

// backoff is exponential with ±20 % jitter, capped.
func (l *Lane) backoff(attempts int) time.Duration {
	d := l.cfg.RetryBase
	for i := 1; i < attempts && d < l.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, l.cfg.RetryMax)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
