// Package members keeps the set of live workers in the WORKERS bucket and spreads partitions
// over them by rendezvous hashing: each worker computes the same owner for every partition
// from the same member list, and a change moves only the partitions of the worker that came
// or went. Heartbeats are key puts; a dead worker's key expires and leaves a marker that every
// watcher receives, so no one polls.
package members

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// Group is this worker's membership. Members are known by their id as one subject token
// (schema.Token): that is what their WORKERS key holds and what Owner returns.
type Group struct {
	ID  string // schema.Token of the worker id
	kv  jetstream.KeyValue
	ttl time.Duration
	log *slog.Logger
}

// New joins nobody yet; Run does.
func New(kv jetstream.KeyValue, id string, ttl time.Duration, log *slog.Logger) *Group {
	return &Group{ID: schema.Token(id), kv: kv, ttl: ttl, log: log}
}

// beat is a heartbeat. It names its worker, and a key whose value names another is not a
// member: a copy of a real heartbeat written under a made-up key (the reply-subject route of
// schema/access.go) would otherwise take partitions that no one then pulls.
type beat struct {
	ID      string    `json:"id"` // schema.Token of the worker id, the key's last token
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// Run heartbeats and calls onChange with the sorted live member ids whenever they change
// (first call once the current members are known). It returns when ctx ends, after deleting
// its key so the others take its partitions at once.
func (g *Group) Run(ctx context.Context, onChange func(live []string)) error {
	host, _ := os.Hostname()
	me := beat{ID: g.ID, Host: host, PID: os.Getpid(), Started: time.Now().UTC()}
	val, _ := json.Marshal(me)
	// Two processes on one id (one credentials file started twice) share one membership:
	// each one's beats stand for the other's and ownership flaps. Said at start when the
	// other beats fresh, and by both when one sees the other's beat.
	if e, err := g.kv.Get(ctx, schema.WorkerKey(g.ID)); err == nil && time.Since(e.Created()) < g.ttl {
		var b beat
		if json.Unmarshal(e.Value(), &b) == nil {
			g.warnTwin(b, time.Since(e.Created()))
		}
	}
	twinSaid := false
	if _, err := g.kv.Put(ctx, schema.WorkerKey(g.ID), val); err != nil {
		return err
	}
	w, err := g.kv.Watch(ctx, "w.*")
	if err != nil {
		return err
	}
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	t := time.NewTicker(g.ttl / 3)
	defer t.Stop()
	live := map[string]bool{}
	initial := true
	selfSeen := time.Now() // when the watch last showed our own heartbeat
	var last []string
	emit := func() {
		ids := make([]string, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, last) {
			last = ids
			onChange(ids)
		}
	}
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = g.kv.Delete(dctx, schema.WorkerKey(g.ID))
			cancel()
			return nil
		case <-t.C:
			if _, err := g.kv.Put(ctx, schema.WorkerKey(g.ID), val); err != nil && ctx.Err() == nil {
				g.log.Warn("heartbeat", "err", err)
			}
			// Another worker (or the edge) may have set the bucket's TTL shorter than ours:
			// beat fast enough for the bucket, or our key would expire between beats.
			if st, err := g.kv.Status(ctx); err == nil && st.TTL() > 0 && st.TTL() < g.ttl {
				g.log.Warn("WORKERS bucket TTL is shorter than -member-ttl; following the bucket", "bucket_ttl", st.TTL(), "member_ttl", g.ttl)
				g.ttl = st.TTL()
				t.Reset(g.ttl / 3)
			}
			// Our heartbeats go out every ttl/3 and the watch shows each of them. A watch that
			// has shown none for a whole ttl is on a bucket that is gone (deleted and made
			// anew, as after an embedded JetStream's restart): it would never show anything
			// again, and it does not end by itself.
			if time.Since(selfSeen) > g.ttl {
				g.log.Warn("WORKERS watch shows nothing; watching again")
				w.Stop()
				if w, err = g.rewatch(ctx); err != nil {
					return nil // ctx ended
				}
				live, initial, selfSeen = map[string]bool{}, true, time.Now()
			}
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				// The bucket went away under the watch (a NATS server restarted without its
				// memory streams): keep the partitions owned now and watch again once the edge
				// has made the bucket anew.
				g.log.Warn("WORKERS watch ended; watching again")
				if w, err = g.rewatch(ctx); err != nil {
					return nil // ctx ended
				}
				live, initial, selfSeen = map[string]bool{}, true, time.Now()
				continue
			}
			if e == nil {
				initial = false
				live[g.ID] = true // our own put may not have been seen if it raced the watch
				emit()
				continue
			}
			id := strings.TrimPrefix(e.Key(), "w.")
			if e.Operation() == jetstream.KeyValuePut {
				var b beat
				if json.Unmarshal(e.Value(), &b) != nil || b.ID != id {
					g.log.Warn("WORKERS entry that names another worker; not a member", "key", e.Key())
					continue
				}
				live[id] = true
				if id == g.ID {
					selfSeen = time.Now()
					if !twinSaid && (b.Host != me.Host || b.PID != me.PID || !b.Started.Equal(me.Started)) {
						twinSaid = true
						g.warnTwin(b, 0)
					}
				}
			} else {
				delete(live, id)
				if id == g.ID {
					// Our key expired (we were stalled): put it back; until then we own nothing.
					_, _ = g.kv.Put(ctx, schema.WorkerKey(g.ID), val)
				}
			}
			if !initial {
				emit()
			}
		}
	}
}

// warnTwin says that another process heartbeats under this worker's id.
func (g *Group) warnTwin(b beat, age time.Duration) {
	g.log.Warn("another worker runs with this id: two processes on one id share one membership and their partitions flap; stop one, or issue each its own credentials (edge creds worker -id <new id> -out FILE)",
		"worker", g.ID, "other_host", b.Host, "other_pid", b.PID, "other_started", b.Started, "heartbeat_age", age.Round(time.Millisecond))
}

// rewatch puts the heartbeat back and watches the bucket again, retrying every second until
// it can or ctx ends.
func (g *Group) rewatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		val, _ := json.Marshal(beat{ID: g.ID, Started: time.Now().UTC()})
		if _, err := g.kv.Put(ctx, schema.WorkerKey(g.ID), val); err != nil {
			continue
		}
		if w, err := g.kv.Watch(ctx, "w.*"); err == nil {
			return w, nil
		}
	}
}

// Owner returns the member that owns a partition: the highest hash of (member, partition).
func Owner(live []string, partition string) string {
	var best string
	var bestScore uint64
	for _, id := range live {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(partition))
		if s := mix(h.Sum64()); best == "" || s > bestScore {
			best, bestScore = id, s
		}
	}
	return best
}

// mix spreads FNV's output (its high bits vary little for similar keys).
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9a3ae8f3e1f
	x ^= x >> 33
	return x
}
