// Package sites keeps every site's delivery settings in memory, fed by a watch on the SITES
// bucket the edge keeps current. Jobs carry no secrets; a lookup here costs a map read, and a
// change made in the edge reaches every worker as a pushed update, with no polling.
package sites

import (
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

	"spookat/schema"
)

// Cache is a live copy of the SITES bucket. It takes a value only when the edge signed it
// for its key (schema.OpenSite) and it is not older than the one it holds.
type Cache struct {
	kv     jetstream.KeyValue
	signer string // the edge's account public key
	log    *slog.Logger
	mu     sync.RWMutex
	m      map[int64]*schema.SiteDelivery
	// uncleanStart is when the edge last started after a crash or power cut (UncleanStart).
	uncleanStart atomic.Int64 // Unix ns, 0: never
	// erased are the conversations of people erased lately (schema.KeyErased).
	erased atomic.Pointer[map[int64]int64]
	// changed is signalled (never blocking) whenever a site's value changes.
	changed chan struct{}
}

// Changed is signalled whenever a site's value changes (the Discord gateways follow it).
func (c *Cache) Changed() <-chan struct{} { return c.changed }

// WithBotToken lists the sites that take replies from Discord (a bot token and a webhook).
func (c *Cache) WithBotToken() []*schema.SiteDelivery {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*schema.SiteDelivery
	for _, d := range c.m {
		if d.DiscordBotToken != "" && d.DiscordWebhook != "" {
			out = append(out, d)
		}
	}
	return out
}

func (c *Cache) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Erased says whether a conversation belongs to a person the site erased lately: its jobs are
// dropped, not delivered.
func (c *Cache) Erased(conversationID int64) bool {
	m := c.erased.Load()
	if m == nil || conversationID == 0 {
		return false
	}
	_, ok := (*m)[conversationID]
	return ok
}

// UncleanStart is when the edge last started after a run that crashed or lost its power
// (schema.KeyUncleanStart; zero: not since the bucket was made): JOBS messages stored before
// it may have been delivered already.
func (c *Cache) UncleanStart() time.Time {
	if ns := c.uncleanStart.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Open starts watching the bucket and returns once the current values are loaded. The watch
// stops with ctx. signer is the account public key the edge signs values with (the issuer of
// the worker's own credentials).
func Open(ctx context.Context, js jetstream.JetStream, signer string, log *slog.Logger) (*Cache, error) {
	if signer == "" {
		return nil, errors.New("no key to check SITES values with")
	}
	kv, err := js.KeyValue(ctx, schema.BucketSites)
	if err != nil {
		return nil, err
	}
	c := &Cache{kv: kv, signer: signer, log: log, m: make(map[int64]*schema.SiteDelivery), changed: make(chan struct{}, 1)}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	loaded := make(chan struct{})
	go func() {
		defer w.Stop()
		initial := true
		for e := range w.Updates() {
			if e == nil { // end of the initial values
				if initial {
					initial = false
					close(loaded)
				}
				continue
			}
			c.apply(e)
		}
		if initial {
			close(loaded)
		}
	}()
	select {
	case <-loaded:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func siteIDOf(key string) (int64, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(key, "site."), 10, 64)
	return id, err == nil
}

func (c *Cache) apply(e jetstream.KeyValueEntry) {
	if e.Key() == schema.KeyUncleanStart && e.Operation() == jetstream.KeyValuePut {
		var u schema.UncleanStart
		if err := c.open(e.Key(), e.Value(), &u); err != nil {
			c.log.Warn("SITES value ignored", "key", e.Key(), "err", err)
			return
		}
		c.uncleanStart.Store(u.At.UnixNano())
		return
	}
	if e.Key() == schema.KeyErased && e.Operation() == jetstream.KeyValuePut {
		var x schema.Erased
		if err := c.open(e.Key(), e.Value(), &x); err != nil {
			c.log.Warn("SITES value ignored", "key", e.Key(), "err", err)
			return
		}
		c.erased.Store(&x.Conversations)
		return
	}
	id, ok := siteIDOf(e.Key())
	if !ok {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		c.mu.Lock()
		delete(c.m, id)
		c.mu.Unlock()
		c.signal()
		return
	}
	var d schema.SiteDelivery
	if err := c.open(e.Key(), e.Value(), &d); err != nil {
		c.log.Warn("SITES value ignored", "key", e.Key(), "err", err)
		return
	}
	c.keep(id, &d)
	c.signal()
}

// open checks a value's signature for key and decodes its JSON into v.
func (c *Cache) open(key string, value []byte, v any) error {
	payload, err := schema.OpenSite(key, value, c.signer)
	if err != nil {
		return err
	}
	return json.Unmarshal(payload, v)
}

// keep stores d unless the cache holds a newer value (one written back from the past).
func (c *Cache) keep(id int64, d *schema.SiteDelivery) *schema.SiteDelivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.m[id]; cur != nil && cur.Signed > d.Signed {
		return cur
	}
	c.m[id] = d
	return d
}

// Get returns a site's settings. A miss (the watch lagging behind a brand-new site) falls back
// to a direct read of the bucket.
func (c *Cache) Get(ctx context.Context, id int64) (*schema.SiteDelivery, error) {
	c.mu.RLock()
	d := c.m[id]
	c.mu.RUnlock()
	if d != nil {
		return d, nil
	}
	e, err := c.kv.Get(ctx, schema.SiteKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var nd schema.SiteDelivery
	if err := c.open(e.Key(), e.Value(), &nd); err != nil {
		return nil, err
	}
	return c.keep(id, &nd), nil
}

// Peek returns the cached settings without a bucket read (nil on a miss).
func (c *Cache) Peek(id int64) *schema.SiteDelivery {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[id]
}
