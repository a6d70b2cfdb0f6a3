package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
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
