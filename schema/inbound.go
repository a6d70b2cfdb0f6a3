package schema

import (
	"errors"
	"time"
)

// Inbound is one thing a worker heard from outside for a site, published on INBOUND
// (InboundSubject) and recorded by the edge, the only writer: an operator's reply in a
// conversation's Discord thread, or a status command there. The edge finds the conversation
// from Thread (a forum post's thread) or ReplyTo (a Discord reply to one of the
// conversation's posts in a plain channel) and never trusts a conversation id from outside.
type Inbound struct {
	// ID is the source's own id of what was said ("discord:<channel>:<message id>"): the
	// stored message's client id, so a gateway's resend or a replay stores it once.
	ID      string      `json:"id"`
	Source  Source      `json:"source"` // SourceDiscord, or SourceSlack for a file a Fetch job brought
	SiteID  int64       `json:"site_id"`
	Thread  string      `json:"thread,omitempty"`   // the thread (channel id) it was written in
	ReplyTo string      `json:"reply_to,omitempty"` // the post it answers (a message id)
	Author  string      `json:"author"`             // the name shown to the visitor
	Text    string      `json:"text,omitempty"`
	Kind    MessageKind `json:"kind,omitempty"` // KindClosed or KindReopened: a command; "": a message
	// Internal: a note for operators only ("note: …"), never shown to the visitor.
	Internal bool      `json:"internal,omitempty"`
	At       time.Time `json:"at"`
	// File is an attachment the worker fetched; its bytes wait in BucketInboundFiles.
	File *InboundFile `json:"file,omitempty"`
}

// InboundFile is an attachment a worker fetched from outside (a file posted in a Discord
// thread): its bytes are the object Object of the INBOUND_FILES object store until the edge
// takes them, checks them as it checks an operator's upload, and deletes the object.
type InboundFile struct {
	Object string `json:"object"`
	Name   string `json:"name"`
	Type   string `json:"type,omitempty"` // as the source said; the edge sniffs the bytes itself
	Size   int64  `json:"size"`
}

// MaxInboundFileBytes is the largest attachment a worker fetches (Discord's own limit for a
// bot-less upload); a site's own limit may be lower, and the edge applies it.
const MaxInboundFileBytes = 25 << 20

// MaxInboundBytes bounds one INBOUND message (its text is cut to MaxTextRunes first).
const MaxInboundBytes = 64 << 10

// Check refuses an Inbound the edge cannot record, with the field to fix.
func (in *Inbound) Check() error {
	switch {
	case in.ID == "" || len(in.ID) > 200:
		return errors.New("id: the source's id of the message (at most 200 bytes)")
	case in.Source != SourceDiscord && in.Source != SourceSlack:
		return errors.New("source: discord or slack")
	case in.Source == SourceSlack && (in.File == nil || in.Thread == ""):
		return errors.New("file: from Slack a worker brings files (in a thread) only")
	case in.SiteID <= 0:
		return errors.New("site_id: the site it concerns")
	case in.Thread == "" && in.ReplyTo == "":
		return errors.New("thread or reply_to: where it was written")
	case in.Kind != "" && in.Kind != KindClosed && in.Kind != KindReopened:
		return errors.New("kind: closed, reopened, or none for a message")
	case in.Kind == "" && in.Text == "" && in.File == nil:
		return errors.New("text: a message needs some, or a file")
	case in.File != nil && (in.File.Object == "" || len(in.File.Object) > 200 || in.File.Size <= 0 || in.File.Size > MaxInboundFileBytes):
		return errors.New("file: an object name and a size up to 25 MiB")
	case len([]rune(in.Text)) > MaxTextRunes:
		return errors.New("text: too long")
	}
	return nil
}
