package jobs

import (
	"slices"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Env is what a message's jobs depend on besides its committed row: what the edge knows in
// memory when it publishes them.
type Env struct {
	Delivery *schema.SiteDelivery // the site's targets; nil: the site is gone
	// VisitorHere says the visitor has the chat open: an operator's reply is not emailed.
	VisitorHere bool
	InboxURL    string // the conversation in the web inbox
	FileURL     string // the attachment's signed link ("": none)
}

// Build builds the jobs of one committed message: a pure function of the row (with the facts
// the writer read in its transaction, see store.Committed) and env. A message without targets
// has none.
func Build(c *store.Committed, env Env) []schema.Job { return build(c, env, nil) }

// linker makes a message's links: its conversation in the web inbox, its attachment's signed
// link ("" when it has none).
type linker func(conversationID int64, file *schema.File) (inboxURL, fileURL string)

// build is Build, with env's links (InboxURL, FileURL) made by links once the message is
// known to have a job: most messages have none (their site has no targets), and a link is a
// string built for each message that has one.
func build(c *store.Committed, env Env, links linker) []schema.Job {
	if c.Kind == schema.KindTranscript {
		return transcriptJob(c)
	}
	var targets []string
	status := c.Kind.Status() != ""
	// A status change is hidden from the visitor (internal) but reaches every channel: the
	// Slack thread's parent shows it, Slack included when it was made from Slack.
	if c.Internal && !status {
		return nil
	}
	if env.Delivery != nil {
		targets = env.Delivery.Targets(c.First && c.Author == schema.AuthorVisitor)
	}
	if out := c.Source.Outside(); out != "" && !status {
		targets = without(targets, out) // a reply from Slack or Discord is never posted back there
	}
	// An operator's reply reaches a visitor who is gone by email, if they left one.
	replyTo := ""
	if c.Author == schema.AuthorOperator && !env.VisitorHere && c.VisitorEmail != "" {
		replyTo = c.VisitorEmail
		targets = append(targets, schema.TargetEmail)
	}
	// A replay after a crash: what was delivered already is not sent again.
	targets = slices.DeleteFunc(targets, func(t string) bool { return slices.Contains(c.Done, t) })
	if len(targets) == 0 {
		return nil
	}
	if links != nil {
		env.InboxURL, env.FileURL = links(c.ConversationID, c.File)
	}
	var file *schema.File
	if c.File != nil && env.FileURL != "" {
		f := *c.File
		f.URL = env.FileURL
		file = &f
	}
	var started *schema.VisitorContext
	if c.First && c.Author == schema.AuthorVisitor {
		started = c.Started
	}
	jobs := make([]schema.Job, len(targets))
	for i, target := range targets {
		jobs[i] = schema.Job{
			ID:             schema.JobID(c.MessageID, target),
			Lane:           schema.LaneOf(target),
			Target:         target,
			SiteID:         c.SiteID,
			ConversationID: c.ConversationID,
			MessageID:      c.MessageID,
			Author:         c.Author,
			Name:           c.Name,
			Text:           c.Text,
			CreatedAt:      time.UnixMilli(c.CreatedAt).UTC(),
			Kind:           c.Kind,
			First:          c.First,
			Reopened:       c.Reopened,
			File:           file,
			Context:        started,
			InboxURL:       env.InboxURL,
			MaybeRepeat:    c.Replayed,
		}
		if target == schema.TargetEmail {
			jobs[i].To = replyTo
		}
	}
	return jobs
}

// transcriptJob is the one job of a transcript request: the conversation, emailed to the
// visitor (none when they left no address).
func transcriptJob(c *store.Committed) []schema.Job {
	if c.VisitorEmail == "" || c.Transcript == nil || slices.Contains(c.Done, schema.TargetEmail) {
		return nil
	}
	return []schema.Job{{ID: schema.JobID(c.MessageID, schema.TargetEmail), Lane: schema.LaneEmail, Target: schema.TargetEmail,
		SiteID: c.SiteID, ConversationID: c.ConversationID, MessageID: c.MessageID, Author: c.Author, Name: c.Name, Text: c.Text,
		CreatedAt: time.UnixMilli(c.CreatedAt).UTC(), Kind: c.Kind, To: c.VisitorEmail, Transcript: c.Transcript, MaybeRepeat: c.Replayed}}
}

// without drops one target (in place: Targets returns a fresh slice).
func without(targets []string, target string) []string {
	out := targets[:0]
	for _, t := range targets {
		if t != target {
			out = append(out, t)
		}
	}
	return out
}
