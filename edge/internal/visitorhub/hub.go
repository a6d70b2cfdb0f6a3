// Package visitorhub fans committed messages out to the visitors' chat windows (their
// websockets) that watch a conversation; the operators' sockets have the inbox's hub.
// Subscriptions are sharded by conversation, so no lock is shared by every site.
package visitorhub

import (
	"sync"
	"time"

	"spookat/edge/internal/files"
	"spookat/edge/internal/frames"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Subscriber receives message frames of the conversations it subscribed to. Deliver must not
// block: it runs on the writer's goroutine. Signal gets the ephemeral frames (typing, read
// markers): never stored, so a subscriber that has no room for one may drop it.
type Subscriber interface {
	Deliver(messageID int64, frame []byte)
	Signal(frame []byte)
}

const shards = 64

// Hub maps conversations to their subscribers.
type Hub struct {
	shards [shards]shard
	// Files signs the link of an attachment in the frames (nil: no link).
	Files *files.Signer
}

type shard struct {
	mu   sync.RWMutex
	subs map[int64][]Subscriber
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	h := &Hub{}
	for i := range h.shards {
		h.shards[i].subs = make(map[int64][]Subscriber)
	}
	return h
}

func (h *Hub) shard(conversationID int64) *shard { return &h.shards[uint64(conversationID)%shards] }

// Subscribe adds s to a conversation's subscribers.
func (h *Hub) Subscribe(conversationID int64, s Subscriber) {
	sh := h.shard(conversationID)
	sh.mu.Lock()
	sh.subs[conversationID] = append(sh.subs[conversationID], s)
	sh.mu.Unlock()
}

// Unsubscribe removes s from a conversation's subscribers.
func (h *Hub) Unsubscribe(conversationID int64, s Subscriber) {
	sh := h.shard(conversationID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	list := sh.subs[conversationID]
	for i, x := range list {
		if x == s {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			list = list[:len(list)-1]
			break
		}
	}
	if len(list) == 0 {
		delete(sh.subs, conversationID)
	} else {
		sh.subs[conversationID] = list
	}
}

// Watching reports whether any socket watches the conversation (the visitor is connected).
func (h *Hub) Watching(conversationID int64) bool {
	sh := h.shard(conversationID)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return len(sh.subs[conversationID]) > 0
}

// Signal sends an ephemeral frame to every socket watching the conversation (an operator
// typing, an operator's read marker). It reports whether any socket watches.
func (h *Hub) Signal(conversationID int64, frame []byte) bool {
	sh := h.shard(conversationID)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	for _, s := range sh.subs[conversationID] {
		s.Signal(frame)
	}
	return len(sh.subs[conversationID]) > 0
}

// Committed (a store.CommitListener) sends each committed message, as a message frame, to
// the conversation's subscribers other than its sender. Internal notes never reach visitors.
func (h *Hub) Committed(msgs []store.Committed) {
	for i := range msgs {
		c := &msgs[i]
		if st := c.Kind.Status(); st != "" {
			// A status change reaches the visitor as the conversation's state (the window
			// offers a rating when it is closed), never as a message. Snoozed is the
			// operators' business: to the visitor it is open.
			h.Signal(c.ConversationID, frames.Conversation(nil, schema.VisitorStatus(st)))
			continue
		}
		if c.Internal {
			continue
		}
		sh := h.shard(c.ConversationID)
		sh.mu.RLock()
		var frame []byte
		for _, s := range sh.subs[c.ConversationID] {
			if s == c.Origin {
				continue
			}
			if frame == nil { // encode once, only when someone else watches
				frame = frames.Message(nil, c.MessageID, c.Author, c.Name, c.Text, frames.VisitorClientID(c.Author, c.ClientID), c.CreatedAt,
					h.Files.ForVisitor(c.File, time.Now()))
			}
			s.Deliver(c.MessageID, frame)
		}
		sh.mu.RUnlock()
	}
}
