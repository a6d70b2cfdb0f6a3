// Package sites keeps every site in memory for the hot path (site key and origin checks on
// each websocket upgrade, delivery targets on each commit) and mirrors each site's delivery
// settings into the SITES bucket, where workers read them.
package sites

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Site is a site as the edge serves it.
type Site struct {
	*store.Site
	Delivery *schema.SiteDelivery
	// Brake is the site's flood brake and message cap; it survives changes to the site.
	Brake *brakes.Site
	// Hours are the chat window's office hours, parsed; WindowJSON is the window's settings
	// as the hello carries them (without the hours, which the window needs only as open or not).
	Hours      schema.OfficeHours
	WindowJSON []byte
	anyOrigin  bool
}

// AllowsOrigin reports whether a browser page at origin may open the widget.
func (s *Site) AllowsOrigin(origin string) bool {
	if s.anyOrigin {
		return true
	}
	for _, o := range s.Origins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

type snapshot struct {
	byKey map[string]*Site
	byID  map[int64]*Site
}

// Registry is a copy-on-write map of sites: readers never lock. Sites change rarely; a change
// copies the maps.
type Registry struct {
	snap   atomic.Pointer[snapshot]
	mu     sync.Mutex // serialises writers
	kv     jetstream.KeyValue
	signer Signer
	put    map[int64][]byte  // the value last put for each site
	facts  map[string][]byte // the edge's other keys (schema.KeyUncleanStart): the value put
	log    *slog.Logger
	br     *brakes.Brakes
}

// Signer signs SITES values (natsauth.Authority: the edge's account key).
type Signer interface {
	SignSite(key string, payload []byte) []byte
	AccountPublicKey() string
}

// New returns a registry holding sites, each with its own brakes from br.
func New(list []*store.Site, br *brakes.Brakes) *Registry {
	r := &Registry{br: br}
	snap := &snapshot{byKey: make(map[string]*Site, len(list)), byID: make(map[int64]*Site, len(list))}
	for _, s := range list {
		site := wrap(s, br.Site())
		snap.byKey[s.Key] = site
		snap.byID[s.ID] = site
	}
	r.snap.Store(snap)
	return r
}

func wrap(s *store.Site, brake *brakes.Site) *Site {
	site := &Site{Site: s, Brake: brake, Delivery: &schema.SiteDelivery{
		SiteID:          s.ID,
		Name:            s.Name,
		SlackToken:      s.SlackToken,
		SlackChannel:    s.SlackChannel,
		DiscordWebhook:  s.DiscordWebhook,
		DiscordBotToken: s.DiscordBotToken,
		WebhookURL:      s.WebhookURL,
		WebhookSecret:   s.WebhookSecret,
		NotifyEmail:     s.NotifyEmail,
	}}
	for _, o := range s.Origins {
		if o == "*" {
			site.anyOrigin = true
		}
	}
	site.Hours = s.Widget.OfficeHours()
	w := s.Widget
	w.Hours, w.TimeZone = "", ""
	if w.FileMaxMB == 0 {
		w.FileMaxMB = schema.DefaultFileMaxMB // the window checks a file's size before sending it
	}
	site.WindowJSON, _ = json.Marshal(&w) // strings and a map of strings: it cannot fail
	return site
}

// ByKey finds a site by its public key.
func (r *Registry) ByKey(key string) *Site { return r.snap.Load().byKey[key] }

// ByID finds a site by id.
func (r *Registry) ByID(id int64) *Site { return r.snap.Load().byID[id] }

// All returns every site.
func (r *Registry) All() []*Site {
	snap := r.snap.Load()
	out := make([]*Site, 0, len(snap.byID))
	for _, s := range snap.byID {
		out = append(out, s)
	}
	return out
}

// Put adds or replaces sites (after they were committed) and mirrors them to the bucket.
func (r *Registry) Put(ctx context.Context, list ...*store.Site) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	snap := &snapshot{byKey: make(map[string]*Site, len(old.byKey)+len(list)), byID: make(map[int64]*Site, len(old.byID)+len(list))}
	for k, v := range old.byKey {
		snap.byKey[k] = v
	}
	for k, v := range old.byID {
		snap.byID[k] = v
	}
	for _, s := range list {
		brake := r.br.Site()
		if prev := snap.byID[s.ID]; prev != nil {
			delete(snap.byKey, prev.Key)
			brake = prev.Brake
		}
		site := wrap(s, brake)
		snap.byKey[s.Key] = site
		snap.byID[s.ID] = site
	}
	r.snap.Store(snap)
	if r.kv == nil {
		return nil
	}
	return r.mirror(ctx, list)
}

// Mirror attaches the SITES bucket and writes every site into it, signed (at start, so that
// workers see settings changed while the edge was down), then watches the bucket until ctx
// ends: a value the edge did not put (NATS lets an identity that may read a stream answer
// into any subject, see schema/access.go) is put back and logged. Workers would ignore it
// anyway, its signature being wrong; putting it back keeps their settings current.
func (r *Registry) Mirror(ctx context.Context, kv jetstream.KeyValue, signer Signer, log *slog.Logger) error {
	r.mu.Lock()
	r.kv, r.signer, r.log, r.put = kv, signer, log, make(map[int64][]byte)
	var list []*store.Site
	for _, s := range r.snap.Load().byID {
		list = append(list, s.Site)
	}
	err := r.mirror(ctx, list)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return err
	}
	go r.guard(ctx, w)
	return nil
}

// MarkUncleanStart tells the workers that this edge started at at after a run that crashed or
// lost its power (schema.KeyUncleanStart). Call it after Mirror.
func (r *Registry) MarkUncleanStart(ctx context.Context, at time.Time) error {
	body, err := json.Marshal(schema.UncleanStart{At: at})
	if err != nil {
		return err
	}
	val := r.signer.SignSite(schema.KeyUncleanStart, body)
	r.mu.Lock()
	if r.facts == nil {
		r.facts = make(map[string][]byte)
	}
	r.facts[schema.KeyUncleanStart] = val // before the put: the guard may see it first
	r.mu.Unlock()
	_, err = r.kv.Put(ctx, schema.KeyUncleanStart, val)
	return err
}

// MarkErased tells the workers that these conversations' person was erased
// (schema.KeyErased): their jobs still in JOBS are dropped. The list keeps the conversations
// of the last schema.ErasedKeep, merged with what the bucket holds (an edge restarted since).
// Without a bucket (the command line on a stopped edge) it does nothing and says so.
func (r *Registry) MarkErased(ctx context.Context, conversations []int64, now time.Time) error {
	if r.kv == nil {
		return errors.New("no SITES bucket: the edge is not running")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	x := schema.Erased{Conversations: map[int64]int64{}}
	if e, err := r.kv.Get(ctx, schema.KeyErased); err == nil {
		if payload, err := schema.OpenSite(schema.KeyErased, e.Value(), r.signer.AccountPublicKey()); err == nil {
			_ = json.Unmarshal(payload, &x)
		}
	}
	if x.Conversations == nil {
		x.Conversations = map[int64]int64{}
	}
	for id, at := range x.Conversations {
		if now.Sub(time.UnixMilli(at)) > schema.ErasedKeep {
			delete(x.Conversations, id)
		}
	}
	for _, id := range conversations {
		x.Conversations[id] = now.UnixMilli()
	}
	body, err := json.Marshal(x)
	if err != nil {
		return err
	}
	val := r.signer.SignSite(schema.KeyErased, body)
	if r.facts == nil {
		r.facts = make(map[string][]byte)
	}
	r.facts[schema.KeyErased] = val // before the put: the guard may see it first
	_, err = r.kv.Put(ctx, schema.KeyErased, val)
	return err
}

func (r *Registry) guard(ctx context.Context, w jetstream.KeyWatcher) {
	defer w.Stop()
	for e := range w.Updates() {
		if e == nil {
			continue
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(e.Key(), "site."), 10, 64)
		r.mu.Lock()
		want, known := r.put[id]
		if fact, ok := r.facts[e.Key()]; ok {
			want, known, err = fact, true, nil
		}
		foreign := err != nil || !known || e.Operation() != jetstream.KeyValuePut || !bytes.Equal(e.Value(), want)
		if foreign {
			r.log.Warn("SITES written by someone other than the edge; putting back what the edge holds", "key", e.Key(), "op", e.Operation().String())
			if known {
				_, err = r.kv.Put(ctx, e.Key(), want)
			} else if e.Operation() == jetstream.KeyValuePut {
				err = r.kv.Delete(ctx, e.Key())
			}
			if err != nil && ctx.Err() == nil {
				r.log.Error("SITES: put back", "key", e.Key(), "err", err)
			}
		}
		r.mu.Unlock()
	}
}

// mirror puts the sites' delivery settings into SITES, signed. Caller holds r.mu.
func (r *Registry) mirror(ctx context.Context, list []*store.Site) error {
	snap := r.snap.Load()
	for _, s := range list {
		d := *snap.byID[s.ID].Delivery
		d.Signed = time.Now().UnixNano()
		body, err := json.Marshal(&d)
		if err != nil {
			return err
		}
		key := schema.SiteKey(s.ID)
		val := r.signer.SignSite(key, body)
		r.put[s.ID] = val // before the put: the watch may see it first
		if _, err := r.kv.Put(ctx, key, val); err != nil {
			return err
		}
	}
	return nil
}
