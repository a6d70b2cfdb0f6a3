package server_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// The page a visitor is on: a page frame is checked (each refusal is invalid with a sentence
// naming the field), kept until the first message stores it on the visitor and the
// conversation, then each new page updates the visitor (not where the conversation started)
// and reaches the operators live; the inbox's conversation shows both, and the person's
// earlier conversations found by the email they left.
func TestPageContext(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "ctx", Origins: []string{"http://site.test"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ana@ctx.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	page := func(url, title string) map[string]string {
		return map[string]string{"type": "page", "url": url, "title": title, "referrer": "https://www.google.com/search?q=chat",
			"language": "de-DE", "time_zone": "Europe/Berlin"}
	}
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	t.Run("refused", func(t *testing.T) {
		r := edgetest.Dial(t, e.Addr, site.Key, "")
		for _, tc := range []struct {
			name, field, value, want string
		}{
			{"another origin", "url", "https://evil.test/", "url must be a page of the origin"},
			{"not http", "url", "javascript:alert(1)", "url must be the page's http or https address"},
			{"referrer", "referrer", "file:///etc/passwd", "referrer must be"},
			{"language", "language", "<b>", "language must be"},
			{"time zone", "time_zone", "Europe/../etc", "time_zone must be"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := page("http://site.test/", "Home")
				f[tc.field] = tc.value
				r.Send(t, f)
				if got := r.Read(t); got.Type != "error" || got.Code != schema.CodeInvalid || !strings.HasPrefix(got.Message, tc.want) {
					t.Fatalf("%+v, want invalid %q", got, tc.want)
				}
			})
		}
	})
	db := edgetest.OpenDB(t, e.DataDir)
	c.Send(t, page("http://site.test/pricing?plan=pro", "Pricing"))
	ack, err := c.SendAck("c1", "Is the pro plan monthly?") // an error for the page would come first
	testkit.NoErr(t, err)
	conv := *ack.ConversationID
	started := func() string {
		var s string
		st, _, err := db.Prepare(`SELECT coalesce(cc.context, '') || '|' || v.context FROM conversations c JOIN visitors v ON v.id = c.visitor_id
			LEFT JOIN conversation_contexts cc ON cc.conversation_id = c.id WHERE c.id = ?`)
		testkit.NoErr(t, err)
		defer st.Close()
		st.BindInt64(1, conv)
		if st.Step() {
			s = st.ColumnText(0)
		}
		return s
	}
	if s := started(); strings.Count(s, `"url":"http://site.test/pricing?plan=pro"`) != 2 || !strings.Contains(s, `"time_zone":"Europe/Berlin"`) {
		t.Fatalf("after the first message: %s", s)
	}

	in := edgetest.Login(t, e.Addr, "ana@ctx.test", "correct horse battery")
	ops := in.DialInbox(t)
	c.Send(t, page("http://site.test/checkout", "Checkout"))
	for {
		ev, err := ops.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("no page event: %v", err)
		}
		if ev["type"] != "page" {
			continue
		}
		vc, _ := ev["context"].(map[string]any)
		if ev["conversation_id"] != float64(conv) || vc["url"] != "http://site.test/checkout" || vc["title"] != "Checkout" {
			t.Fatalf("page event %v", ev)
		}
		break
	}
	c.Send(t, page("http://site.test/checkout", "Checkout")) // the same page again: nothing new
	c.Send(t, map[string]string{"type": "email", "email": "ada@example.com"})
	if f := c.Read(t); f.Type != "email_saved" {
		t.Fatalf("email: %+v", f)
	}
	var got struct {
		Context store.ConversationContext `json:"context"`
	}
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(conv, 10), nil, &got)
	if got.Context.Now == nil || got.Context.Now.URL != "http://site.test/checkout" || got.Context.Started == nil ||
		got.Context.Started.URL != "http://site.test/pricing?plan=pro" || got.Context.Now.Referrer != "https://www.google.com/search?q=chat" ||
		got.Context.Now.Language != "de-DE" || len(got.Context.Earlier) != 0 {
		t.Fatalf("%+v", got.Context)
	}

	// The same person on another device: one email, two conversations, each the other's earlier.
	c2 := edgetest.Dial(t, e.Addr, site.Key, "")
	ack2, err := c2.SendAck("d1", "Me again, from my phone")
	testkit.NoErr(t, err)
	c2.Send(t, map[string]string{"type": "email", "email": "ADA@example.com"})
	if f := c2.Read(t); f.Type != "email_saved" {
		t.Fatalf("email: %+v", f)
	}
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ack2.ConversationID, 10), nil, &got)
	if got.Context.Now != nil || len(got.Context.Earlier) != 1 || got.Context.Earlier[0].ID != conv ||
		got.Context.Earlier[0].LastText != "Is the pro plan monthly?" {
		t.Fatalf("second device: %+v", got.Context)
	}

	// Page frames take from the socket's signal allowance (as typing and seen do), never from
	// its messages': a page flood is refused, and the visitor's message still goes through.
	t.Run("braked apart from messages", func(t *testing.T) {
		c3 := edgetest.Dial(t, e.Addr, site.Key, "")
		for i := range 8 {
			c3.Send(t, page("http://site.test/p"+strconv.Itoa(i), "P"))
		}
		if f := c3.Read(t); f.Type != "error" || f.Code != schema.CodeRateLimited {
			t.Fatalf("after 8 pages at once: %+v, want rate_limited", f)
		}
		for {
			f, err := c3.SendAck("m1", "hello")
			if err == nil {
				break
			}
			if f.Code != schema.CodeRateLimited || f.ClientID != "" {
				t.Fatalf("the message after a page flood: %+v %v", f, err)
			}
		}
	})
}
