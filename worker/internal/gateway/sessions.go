package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
	"spookat/worker/internal/deliver"
)

// KVSessions keeps sessions in a key-value bucket (THREADS).
type KVSessions struct{ KV jetstream.KeyValue }

// Load implements Sessions.
func (k KVSessions) Load(ctx context.Context, siteID int64) (Session, error) {
	var s Session
	e, err := k.KV.Get(ctx, schema.DiscordSessionKey(siteID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if json.Unmarshal(e.Value(), &s) != nil || s.Seq < 0 {
		return Session{}, nil // not what a worker wrote: a new session is better
	}
	return s, nil
}

// Save implements Sessions.
func (k KVSessions) Save(ctx context.Context, siteID int64, s Session) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = k.KV.Put(ctx, schema.DiscordSessionKey(siteID), b)
	return err
}

var _ Sessions = KVSessions{}

// ObjectFiles keeps fetched attachments in an object store (INBOUND_FILES).
type ObjectFiles struct{ Store jetstream.ObjectStore }

// Has implements Files.
func (o ObjectFiles) Has(ctx context.Context, name string) (bool, error) {
	_, err := o.Store.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Put implements Files.
func (o ObjectFiles) Put(ctx context.Context, name string, data []byte) error {
	_, err := o.Store.PutBytes(ctx, name, data)
	return err
}

// Keep puts into files, under name, what get fetches, unless a replay finds it there already:
// the size kept (0: it was there).
func Keep(ctx context.Context, files Files, name string, get func() ([]byte, error)) (size int64, err error) {
	has, err := files.Has(ctx, name)
	if err != nil || has {
		return 0, err
	}
	data, err := get()
	if err != nil {
		return 0, err
	}
	return int64(len(data)), files.Put(ctx, name, data)
}

// AllowedURL says whether a file may be fetched from raw: https from one of hosts, or, with
// anyHost (labs and tests, -allow-private-targets), any http(s) URL.
func AllowedURL(raw string, anyHost bool, hosts ...string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if anyHost {
		return u.Scheme == "http" || u.Scheme == "https"
	}
	return u.Scheme == "https" && slices.Contains(hosts, u.Host)
}

// HTTPDownload fetches an attachment with c (at most max bytes; a larger one, or a 4xx
// answer, is deliver.ErrNotFetchable).
func HTTPDownload(c *http.Client) func(ctx context.Context, url string, max int64) ([]byte, error) {
	return func(ctx context.Context, url string, max int64) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", deliver.ErrNotFetchable, err)
		}
		return Get(c, req, max)
	}
}

// Get does req with c and reads at most max bytes of a 200 answer; a redirect (Slack's file
// host sends one to its login page for a token it refuses), a 4xx answer or a larger body is
// deliver.ErrNotFetchable, anything else an error worth trying again.
func Get(c *http.Client, req *http.Request, max int64) ([]byte, error) {
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 500:
		return nil, fmt.Errorf("%w: %s", deliver.ErrNotFetchable, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, errors.New(resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: larger than it said", deliver.ErrNotFetchable)
	}
	return data, nil
}
