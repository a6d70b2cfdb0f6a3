package inbox

import (
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"

	"spookat/edge/internal/frames"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Hub fans live changes out to the operator websockets that watch a site: messages as they
// commit (internal notes included), delivery states as the worker reports them, conversations
// closed or reopened. Publish runs on the writer's goroutine: with no operator online it is one
// atomic load; otherwise it encodes each event once and queues it without waiting.
//
// The hub also knows whose each socket is (operator, session), so that a logout, a new
// password, a removal or a membership taken away closes the sockets it ends at once instead
// of leaving them streaming until they drop.
type Hub struct {
	n  atomic.Int64 // subscriptions, for the fast path
	mu sync.RWMutex
	// subs: a site's sockets, a slice replaced (never changed in place) when one comes or
	// goes, because the writer walks it for every message and sockets come and go rarely.
	subs map[int64][]*opConn
	ops  map[int64]map[*opConn]struct{} // by operator id

	// WatchChanged, if set, hears of each site whose inbox the first operator opened or the
	// last one closed (the visitors' windows say online or away from it). Called outside
	// the hub's lock; it must not block.
	WatchChanged func(siteID int64)
}

// Close codes of the operator websocket (documented in schema/PROTOCOL.md): the reason
// tells the inbox whether to log in again or to reconnect with its new site list.
const (
	CloseSessionEnded = 4401 // logout, new password, operator removed: log in again
	CloseSitesChanged = 4403 // a membership was taken away: reconnect and re-read /v1/api/me
)

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{subs: make(map[int64][]*opConn), ops: make(map[int64]map[*opConn]struct{})}
}

// track registers a socket under its operator before its sites and session are read, so a
// change committed after that read always finds the socket to close.
func (h *Hub) track(c *opConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.ops[c.operatorID]
	if set == nil {
		set = make(map[*opConn]struct{})
		h.ops[c.operatorID] = set
	}
	set[c] = struct{}{}
}

func (h *Hub) untrack(c *opConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if set := h.ops[c.operatorID]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(h.ops, c.operatorID)
		}
	}
}

// closeWhere closes the operator's sockets for which skip (nil: none) is false.
func (h *Hub) closeWhere(operatorID int64, code int, reason string, skip func(*opConn) bool) {
	h.mu.RLock()
	var list []*opConn
	for c := range h.ops[operatorID] {
		if skip == nil || !skip(c) {
			list = append(list, c)
		}
	}
	h.mu.RUnlock()
	for _, c := range list {
		c.closeWith(code, reason)
	}
}

// EndOperator closes every socket of an operator whose sessions and tokens were revoked
// (new password, removal).
func (h *Hub) EndOperator(operatorID int64) {
	h.closeWhere(operatorID, CloseSessionEnded, "session_ended", nil)
}

// SitesChanged closes every socket of an operator who lost a site; the inbox reconnects and
// subscribes to the sites it has now.
func (h *Hub) SitesChanged(operatorID int64) {
	h.closeWhere(operatorID, CloseSitesChanged, "sites_changed", nil)
}

// endSession closes the sockets opened with one session (logout).
func (h *Hub) endSession(operatorID int64, session []byte) {
	h.closeWhere(operatorID, CloseSessionEnded, "session_ended", func(c *opConn) bool { return string(c.session) != string(session) })
}

// endToken closes the sockets opened with one API token (revoked).
func (h *Hub) endToken(operatorID int64, token []byte) {
	h.closeWhere(operatorID, CloseSessionEnded, "session_ended", func(c *opConn) bool { return string(c.token) != string(token) })
}

// endOthers closes an operator's sockets but those of the session keep (their own new
// password: the tab where they changed it stays live).
func (h *Hub) endOthers(operatorID int64, keep []byte) {
	h.closeWhere(operatorID, CloseSessionEnded, "session_ended", func(c *opConn) bool {
		return keep != nil && string(c.session) == string(keep)
	})
}

// Watching reports whether an operator has an inbox open on the site.
func (h *Hub) Watching(siteID int64) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[siteID]) > 0
}

func (h *Hub) subscribe(c *opConn, sites []int64) {
	var changed []int64
	h.mu.Lock()
	for _, id := range sites {
		set := h.subs[id]
		if slices.Contains(set, c) {
			continue
		}
		if len(set) == 0 {
			changed = append(changed, id)
		}
		h.subs[id] = append(slices.Clip(set), c)
		h.n.Add(1)
	}
	h.mu.Unlock()
	h.watchChanged(changed)
}

func (h *Hub) unsubscribe(c *opConn, sites []int64) {
	var changed []int64
	h.mu.Lock()
	for _, id := range sites {
		set := h.subs[id]
		i := slices.Index(set, c)
		if i < 0 {
			continue
		}
		h.n.Add(-1)
		if len(set) == 1 {
			delete(h.subs, id)
			changed = append(changed, id)
			continue
		}
		h.subs[id] = slices.Delete(slices.Clone(set), i, i+1)
	}
	h.mu.Unlock()
	h.watchChanged(changed)
}

func (h *Hub) watchChanged(sites []int64) {
	if h.WatchChanged == nil {
		return
	}
	for _, id := range sites {
		h.WatchChanged(id)
	}
}

// send queues an event, encoded by encoding/json, to the site's sockets.
func (h *Hub) send(siteID int64, ev any) { h.sendFrame(siteID, jsonEvent(ev)) }

// jsonEvent appends ev encoded by encoding/json.
func jsonEvent(ev any) func(dst []byte) []byte {
	return func(dst []byte) []byte {
		b, _ := json.Marshal(ev) // the events are plain structs: it cannot fail
		return append(dst, b...)
	}
}

// sendFrame queues the event encode appends to its argument (only when someone watches the
// site) to the site's sockets: encoded in the socket's queue when one watches, once for all
// when more do.
func (h *Hub) sendFrame(siteID int64, encode func(dst []byte) []byte) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	h.sendLocked(siteID, encode)
}

// sendLocked is sendFrame's, h.mu read-locked.
func (h *Hub) sendLocked(siteID int64, encode func(dst []byte) []byte) {
	set := h.subs[siteID]
	switch len(set) {
	case 0:
	case 1:
		set[0].queue(encode)
	default:
		b := encode(nil)
		for _, c := range set {
			c.push(b)
		}
	}
}

// CloseAll closes every operator socket (graceful stop); the inbox reconnects.
func (h *Hub) CloseAll() {
	h.mu.RLock()
	var list []*opConn
	for _, set := range h.ops { // every socket, those of an operator without sites too
		for c := range set {
			list = append(list, c)
		}
	}
	h.mu.RUnlock()
	for _, c := range list {
		c.close()
	}
}

// Event frames on /v1/api/ws (documented in schema/PROTOCOL.md); the message event is
// frames.InboxMessage.
type deliveryEvent struct {
	Type           string         `json:"type"` // "delivery"
	SiteID         int64          `json:"site_id"`
	ConversationID int64          `json:"conversation_id"`
	Delivery       store.Delivery `json:"delivery"`
}

type conversationEvent struct {
	Type           string            `json:"type"` // "conversation"
	SiteID         int64             `json:"site_id"`
	ConversationID int64             `json:"conversation_id"`
	Status         schema.ConvStatus `json:"status"`
	SnoozedUntil   int64             `json:"snoozed_until,omitempty"` // Unix ms, while snoozed
}

type assignedEvent struct {
	Type           string `json:"type"` // "assigned"
	SiteID         int64  `json:"site_id"`
	ConversationID int64  `json:"conversation_id"`
	AssigneeID     int64  `json:"assignee_id"` // 0: nobody
}

type typingEvent struct {
	Type           string        `json:"type"` // "typing"
	SiteID         int64         `json:"site_id"`
	ConversationID int64         `json:"conversation_id"`
	By             schema.Author `json:"by"` // visitor or operator
	OperatorID     int64         `json:"operator_id,omitempty"`
	Name           string        `json:"name,omitempty"`
}

type seenEvent struct {
	Type           string        `json:"type"` // "seen"
	SiteID         int64         `json:"site_id"`
	ConversationID int64         `json:"conversation_id"`
	By             schema.Author `json:"by"` // visitor
	MessageID      int64         `json:"message_id"`
}

// VisitorTyping tells the site's operators that the conversation's visitor is writing.
func (h *Hub) VisitorTyping(siteID, conversationID int64) {
	h.send(siteID, typingEvent{Type: "typing", SiteID: siteID, ConversationID: conversationID, By: schema.AuthorVisitor})
}

// VisitorSeen tells the site's operators how far the visitor has read.
func (h *Hub) VisitorSeen(siteID, conversationID, messageID int64) {
	h.send(siteID, seenEvent{Type: "seen", SiteID: siteID, ConversationID: conversationID, By: schema.AuthorVisitor, MessageID: messageID})
}

type pageEvent struct {
	Type           string                 `json:"type"` // "page"
	SiteID         int64                  `json:"site_id"`
	ConversationID int64                  `json:"conversation_id"`
	Context        *schema.VisitorContext `json:"context"`
}

// VisitorPage tells the site's operators which page the visitor has moved to.
func (h *Hub) VisitorPage(siteID, conversationID int64, c *schema.VisitorContext) {
	h.send(siteID, pageEvent{Type: "page", SiteID: siteID, ConversationID: conversationID, Context: c})
}

type ratingEvent struct {
	Type           string `json:"type"` // "rating"
	SiteID         int64  `json:"site_id"`
	ConversationID int64  `json:"conversation_id"`
	Rating         string `json:"rating"`
	Comment        string `json:"comment,omitempty"`
}

// Rated tells the site's operators how the visitor rated a closed conversation.
func (h *Hub) Rated(siteID, conversationID int64, rating, comment string) {
	h.send(siteID, ratingEvent{Type: "rating", SiteID: siteID, ConversationID: conversationID, Rating: rating, Comment: comment})
}

// OperatorTyping tells the site's other operators who is writing to the visitor.
func (h *Hub) OperatorTyping(siteID, conversationID, operatorID int64, name string) {
	h.send(siteID, typingEvent{Type: "typing", SiteID: siteID, ConversationID: conversationID, By: schema.AuthorOperator,
		OperatorID: operatorID, Name: name})
}

// operatorFile is f with the inbox's link, nil for nil.
func operatorFile(f *schema.File) *schema.File {
	if f == nil {
		return nil
	}
	c := *f
	c.URL = "/v1/api/files/" + f.ID
	return &c
}

// Committed is the inbox's store.CommitListener: each message to its site's operators
// (the hub read-locked once a commit, not once a message).
func (h *Hub) Committed(msgs []store.Committed) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for i := range msgs {
		c := &msgs[i]
		h.sendLocked(c.SiteID, func(dst []byte) []byte {
			return frames.InboxMessage(dst, c.SiteID, c.ConversationID, c.First, &frames.OperatorMessage{
				ID: c.MessageID, Author: c.Author, Name: c.Name, Text: c.Text, Internal: c.Internal, CreatedAt: c.CreatedAt,
				File: operatorFile(c.File), Kind: c.Kind, Reopened: c.Reopened})
		})
		switch st := c.Kind.Status(); {
		case st != "":
			h.sendLocked(c.SiteID, jsonEvent(conversationEvent{Type: "conversation", SiteID: c.SiteID, ConversationID: c.ConversationID, Status: st,
				SnoozedUntil: c.SnoozeUntil}))
		case c.Reopened:
			h.sendLocked(c.SiteID, jsonEvent(conversationEvent{Type: "conversation", SiteID: c.SiteID, ConversationID: c.ConversationID, Status: schema.ConvOpen}))
		case c.Kind == schema.KindAssigned:
			h.sendLocked(c.SiteID, jsonEvent(assignedEvent{Type: "assigned", SiteID: c.SiteID, ConversationID: c.ConversationID, AssigneeID: c.AssigneeID}))
		}
	}
}

// Deliveries is the results recorder's OnRecorded hook: delivery states, live.
func (h *Hub) Deliveries(results []schema.Result) {
	if h.n.Load() == 0 {
		return
	}
	for i := range results {
		r := &results[i]
		h.send(r.SiteID, deliveryEvent{Type: "delivery", SiteID: r.SiteID, ConversationID: r.ConversationID,
			Delivery: store.Delivery{MessageID: r.MessageID, Target: r.Target, Status: r.Status, Attempts: r.Attempts,
				LastError: r.Error, ExternalID: r.ExternalID}})
	}
}
