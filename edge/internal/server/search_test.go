package server_test

import (
	"net/url"
	"strconv"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// The search API over a real edge: a site's operator finds a visitor's message by a word
// (accents folded, the last word a prefix); an operator of another site cannot search it; a
// query the index cannot take gets a code and a sentence.
func TestSearchAPI(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "shop", Origins: []string{"http://site.test"}})
	other := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "other", Origins: []string{"http://site.test"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@shop.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "bob@other.test", Password: "correct horse battery", SiteKeys: []string{other.Key}})
	c := edgetest.Dial(t, e.Addr, site.Key, "")
	ack, err := c.SendAck("s-1", "Ma commande de café n'est pas arrivée")
	if err != nil {
		t.Fatal(err)
	}
	o := edgetest.Dial(t, e.Addr, other.Key, "")
	if _, err := o.SendAck("o-1", "cafe secret of another site"); err != nil {
		t.Fatal(err)
	}

	type hit struct {
		Conversation struct {
			ID     int64 `json:"id"`
			SiteID int64 `json:"site_id"`
		} `json:"conversation"`
		MessageID int64 `json:"message_id"`
		Snippet   []struct {
			Text  string `json:"text"`
			Match bool   `json:"match"`
		} `json:"snippet"`
	}
	var res struct {
		Hits []hit `json:"hits"`
	}
	path := func(siteID int64, q string) string {
		return "/sites/" + strconv.FormatInt(siteID, 10) + "/search?q=" + url.QueryEscape(q)
	}
	ann := edgetest.Login(t, e.Addr, "ann@shop.test", "correct horse battery").NewToken(t)
	// The writer indexes new messages within about a second.
	st := 0
	testkit.WaitFor(t, "the message in the index", 5*time.Second, func() bool {
		st = ann.Do(t, "GET", path(site.ID, "cafe arriv"), nil, &res)
		return st != 200 || len(res.Hits) > 0
	})
	if st != 200 || len(res.Hits) != 1 ||
		res.Hits[0].MessageID != ack.MessageID || res.Hits[0].Conversation.SiteID != site.ID {
		t.Fatalf("search: %d %+v", st, res)
	}
	marked := ""
	for _, s := range res.Hits[0].Snippet {
		if s.Match {
			marked += "[" + s.Text + "]"
		}
	}
	if marked != "[café][arrivée]" {
		t.Errorf("marked words %q, want [café][arrivée]", marked)
	}
	var refused struct{ Code, Message string }
	if st := ann.Do(t, "GET", path(site.ID, `" * "`), nil, &refused); st != 400 || refused.Code != "invalid" || refused.Message == "" {
		t.Errorf("a query of no word: %d %+v", st, refused)
	}
	if st := ann.Do(t, "GET", path(site.ID, "cafe")+"&assignee=bob", nil, &refused); st != 400 || refused.Code != "invalid" || refused.Message == "" {
		t.Errorf("an assignee filter of no meaning: %d %+v", st, refused)
	}
	if st := ann.Do(t, "GET", path(other.ID, "cafe"), nil, &refused); st != 404 && st != 403 {
		t.Errorf("another site's search: %d", st)
	}
	bob := edgetest.Login(t, e.Addr, "bob@other.test", "correct horse battery").NewToken(t)
	res.Hits = nil
	if st := bob.Do(t, "GET", path(other.ID, "cafe"), nil, &res); st != 200 || len(res.Hits) != 1 || res.Hits[0].Conversation.SiteID != other.ID {
		t.Errorf("the other site's operator: %d %+v", st, res)
	}
}
