package plans

import (
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// A plans file is checked at start: each mistake is a sentence naming the field.
func TestParseNamesTheField(t *testing.T) {
	for _, c := range []struct {
		name, json, says string
	}{
		{"not JSON", `{`, "not a plans file"},
		{"an unknown field", `{"default":"free","plans":{"free":{}},"colour":"red"}`, "unknown field"},
		{"no plans", `{"default":"free","plans":{}}`, "plans is empty"},
		{"default missing", `{"default":"gold","plans":{"free":{}}}`, `default "gold" is not one of the plans (free)`},
		{"a negative limit", `{"default":"free","plans":{"free":{"operators":-1}}}`, "plans.free.operators must be 0 (no limit) or more, not -1"},
		{"a price that is not one", `{"default":"free","plans":{"free":{"paddle_prices":["price_1"]}}}`, `plans.free.paddle_prices: "price_1" is not a Paddle price id`},
		{"a price buying two plans", `{"default":"a","plans":{"a":{"paddle_prices":["pri_1"]},"b":{"paddle_prices":["pri_1"]}}}`, "plans.b.paddle_prices: pri_1 buys plan a already"},
		{"a grace too long", `{"default":"free","past_due_grace_days":120,"plans":{"free":{}}}`, "past_due_grace_days must be 0 to 90"},
		{"a short secret", `{"default":"free","paddle_secrets":["short"],"plans":{"free":{}}}`, "paddle_secrets[0] is too short"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v, want an error saying %q", err, c.says)
			}
		})
	}
	c, err := Parse([]byte(`{"default":"free","plans":{"free":{"conversations_per_month":100},"pro":{"paddle_prices":["pri_01a"]}}}`))
	if err != nil || c.PastDueGraceDays != 7 || c.PaddleToleranceSeconds != 5 || c.ByPrice("pri_01a").Name != "pro" || c.Get("nope").Name != "free" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

// A new conversation holds its place from its admission until its first message is
// answered: visitors arriving together cannot all take a site's last place, and a place
// given up (the message refused after all) goes back.
func TestAdmissionHoldsItsPlace(t *testing.T) {
	c, err := Parse([]byte(`{"default":"two","plans":{"two":{"conversations_per_month":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	b := NewBook(c, func() time.Time { return now })
	first := func(site int64) []store.Committed {
		return []store.Committed{{SiteID: site, Author: schema.AuthorVisitor, First: true}}
	}
	r1, _ := b.AdmitConversation(1)
	r2, _ := b.AdmitConversation(1)
	if r1 == nil || r2 == nil {
		t.Fatal("the first two conversations refused")
	}
	if r, sentence := b.AdmitConversation(1); r != nil || sentence == "" {
		t.Fatal("a third admitted while two are on their way")
	}
	if r, _ := b.AdmitConversation(2); r == nil {
		t.Fatal("another site refused")
	}
	r2() // given up before the writer had it
	r3, _ := b.AdmitConversation(1)
	if r3 == nil {
		t.Fatal("the place given up did not come back")
	}
	b.Committed(first(1)) // the commits count them before their acks release the holds
	r1()
	b.Committed(first(1))
	r3()
	if r, _ := b.AdmitConversation(1); r != nil {
		t.Fatal("admitted past the month's two")
	}
	if u := b.Usage(1); u.Conversations != 2 {
		t.Fatalf("usage %+v", u)
	}
	now = now.AddDate(0, 1, 0) // a new month
	if r, _ := b.AdmitConversation(1); r == nil {
		t.Fatal("refused in a new month")
	}
}
