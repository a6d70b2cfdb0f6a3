package jobs_test

import (
	"slices"
	"testing"

	"spookat/edge/internal/jobs"
	"spookat/edge/internal/store"
	"spookat/schema"
)

// Build is a pure function of the committed row and what the edge knows in memory: every rule
// of who hears a message, without NATS or SQLite.
func TestBuild(t *testing.T) {
	site := &schema.SiteDelivery{SiteID: 1, SlackToken: "xoxb", SlackChannel: "C1", WebhookURL: "https://hooks.site.test/x",
		NotifyEmail: "team@site.test"}
	started := &schema.VisitorContext{URL: "https://site.test/pricing"}
	lines := &schema.Transcript{Lines: []schema.TranscriptLine{{Author: schema.AuthorVisitor, Text: "hello"}}}
	away := jobs.Env{Delivery: site, InboxURL: "https://chat.site.test/app/#/conversations/10"}
	here := away
	here.VisitorHere = true
	withLink := away
	withLink.FileURL = "https://chat.site.test/v1/files/k1?exp=1&sig=x"
	file := &schema.File{ID: "k1", Name: "a.png", Type: "image/png", Size: 3}

	for _, tc := range []struct {
		name string
		msg  store.Committed
		env  jobs.Env
		want []string // targets, in order
		to   string   // the email job's recipient ("": the site's address)
		ctx  bool     // the jobs carry where the conversation started
		link bool     // the jobs carry the attachment with its link
	}{
		{name: "a visitor's first message reaches every target and the team's email",
			msg: store.Committed{Author: schema.AuthorVisitor, First: true, Started: started}, env: away,
			want: []string{schema.TargetSlack, schema.TargetWebhook, schema.TargetEmail}, ctx: true},
		{name: "a visitor's later message: no email, no start page",
			msg: store.Committed{Author: schema.AuthorVisitor, Started: started}, env: away,
			want: []string{schema.TargetSlack, schema.TargetWebhook}},
		{name: "a reply to a visitor who is gone and left an address is emailed to them",
			msg: store.Committed{Author: schema.AuthorOperator, VisitorEmail: "v@home.test"}, env: away,
			want: []string{schema.TargetSlack, schema.TargetWebhook, schema.TargetEmail}, to: "v@home.test"},
		{name: "a reply to a visitor with the chat open is not emailed",
			msg: store.Committed{Author: schema.AuthorOperator, VisitorEmail: "v@home.test"}, env: here,
			want: []string{schema.TargetSlack, schema.TargetWebhook}},
		{name: "a reply to a visitor who left no address is not emailed",
			msg: store.Committed{Author: schema.AuthorOperator}, env: away,
			want: []string{schema.TargetSlack, schema.TargetWebhook}},
		{name: "a reply from Slack is not posted back to Slack",
			msg: store.Committed{Author: schema.AuthorOperator, Source: schema.SourceSlack}, env: here,
			want: []string{schema.TargetWebhook}},
		{name: "a visitor's client id that looks like Slack's changes nothing",
			msg: store.Committed{Author: schema.AuthorVisitor, Source: schema.SourceWidget, ClientID: "slack:C1:9.9"}, env: away,
			want: []string{schema.TargetSlack, schema.TargetWebhook}},
		{name: "an internal note goes nowhere",
			msg: store.Committed{Author: schema.AuthorOperator, Internal: true, VisitorEmail: "v@home.test"}, env: away},
		{name: "a status change made from Slack reaches Slack's thread too",
			msg: store.Committed{Author: schema.AuthorOperator, Internal: true, Kind: schema.KindClosed, Source: schema.SourceSlack}, env: here,
			want: []string{schema.TargetSlack, schema.TargetWebhook}},
		{name: "a transcript request is one email to the visitor",
			msg: store.Committed{Author: schema.AuthorSystem, Kind: schema.KindTranscript, VisitorEmail: "v@home.test", Transcript: lines}, env: here,
			want: []string{schema.TargetEmail}, to: "v@home.test"},
		{name: "a transcript request without an address sends nothing",
			msg: store.Committed{Author: schema.AuthorSystem, Kind: schema.KindTranscript, Transcript: lines}, env: away},
		{name: "a site that is gone: only the visitor's email",
			msg: store.Committed{Author: schema.AuthorOperator, VisitorEmail: "v@home.test"}, env: jobs.Env{},
			want: []string{schema.TargetEmail}, to: "v@home.test"},
		{name: "a replay sends nothing again to a target that has it",
			msg: store.Committed{Author: schema.AuthorOperator, VisitorEmail: "v@home.test", Done: []string{schema.TargetSlack, schema.TargetEmail}}, env: away,
			want: []string{schema.TargetWebhook}},
		{name: "a replayed transcript request already emailed",
			msg: store.Committed{Author: schema.AuthorSystem, Kind: schema.KindTranscript, VisitorEmail: "v@home.test", Transcript: lines,
				Done: []string{schema.TargetEmail}}, env: away},
		{name: "an attachment carries its signed link",
			msg: store.Committed{Author: schema.AuthorVisitor, File: file}, env: withLink,
			want: []string{schema.TargetSlack, schema.TargetWebhook}, link: true},
		{name: "an operator's attachment: its signed link to Slack, the webhook and the away visitor's email",
			msg: store.Committed{Author: schema.AuthorOperator, File: file, VisitorEmail: "v@home.test"}, env: withLink,
			want: []string{schema.TargetSlack, schema.TargetWebhook, schema.TargetEmail}, to: "v@home.test", link: true},
		{name: "an attachment without a signer travels as text alone",
			msg: store.Committed{Author: schema.AuthorVisitor, File: file}, env: away,
			want: []string{schema.TargetSlack, schema.TargetWebhook}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.msg
			c.MessageID, c.ConversationID, c.SiteID, c.Text = 7, 10, 1, "hello"
			built := jobs.Build(&c, tc.env)
			var got []string
			for _, j := range built {
				got = append(got, j.Target)
				if j.ID != schema.JobID(7, j.Target) || j.Lane != schema.LaneOf(j.Target) || j.ConversationID != 10 || j.SiteID != 1 || j.Text != "hello" {
					t.Errorf("job %+v: id, lane or message wrong", j)
				}
				if j.Target == schema.TargetEmail && j.To != tc.to {
					t.Errorf("email job to %q, want %q", j.To, tc.to)
				}
				if (j.Context != nil) != tc.ctx {
					t.Errorf("job %s context %+v, want carried: %v", j.Target, j.Context, tc.ctx)
				}
				if (j.File != nil && j.File.URL == tc.env.FileURL) != tc.link {
					t.Errorf("job %s file %+v, want a link: %v", j.Target, j.File, tc.link)
				}
				if j.Kind == schema.KindTranscript && j.Transcript != lines {
					t.Errorf("transcript job without the transcript: %+v", j)
				}
				if j.Kind != schema.KindTranscript && j.InboxURL != tc.env.InboxURL {
					t.Errorf("job %s inbox link %q, want %q", j.Target, j.InboxURL, tc.env.InboxURL)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("targets %v, want %v", got, tc.want)
			}
		})
	}
}
