// Package threads remembers the thread of each conversation at a chat target (the Slack parent
// post's ts) in the THREADS bucket, so whichever worker owns the conversation's partition next
// replies in the same thread. A memory cache in front makes the common case a map read.
package threads

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"spookat/schema"
)

// Store is a cached view of the THREADS bucket.
type Store struct {
	kv jetstream.KeyValue
	mu sync.Mutex
	m  map[string]string
}

// maxCached bounds the memory cache; past it the cache is dropped and refilled from the bucket.
const maxCached = 200_000

// New wraps the bucket.
func New(kv jetstream.KeyValue) *Store { return &Store{kv: kv, m: make(map[string]string)} }

// Get returns the thread id for key, "" when the conversation has no thread yet.
func (s *Store) Get(ctx context.Context, key string) (string, error) {
	s.mu.Lock()
	v, ok := s.m[key]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	v = string(e.Value())
	if !threadID(v) {
		// Not a thread id any worker wrote (Slack ts, Discord snowflake): something else
		// landed under this key. A new thread is better than posting into garbage.
		return "", nil
	}
	s.remember(key, v)
	return v, nil
}

// threadID: what Slack and Discord use as ids, digits and a dot, at most 64 bytes.
func threadID(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= '0' && c <= '9' || c == '.') {
			return false
		}
	}
	return true
}

// Put records a new thread. It is written to the bucket before the job that opened it is
// acknowledged, so a crash cannot lose it.
func (s *Store) Put(ctx context.Context, key, thread string) error {
	s.remember(key, thread)
	_, err := s.kv.Put(ctx, key, []byte(thread))
	return err
}

// SiteOfThread is the site whose conversation opened a Discord thread ("" when none did):
// the gateway forwards replies written in those threads only.
func (s *Store) SiteOfThread(ctx context.Context, thread string) (string, error) {
	if !threadID(thread) || strings.Contains(thread, ".") {
		return "", nil // not a Discord id: no key to look for
	}
	return s.Get(ctx, schema.DiscordThreadSiteKey(thread))
}

// Forget drops a cached entry (the thread was deleted at the target).
func (s *Store) Forget(key string) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

func (s *Store) remember(key, v string) {
	s.mu.Lock()
	if len(s.m) >= maxCached {
		s.m = make(map[string]string)
	}
	s.m[key] = v
	s.mu.Unlock()
}
