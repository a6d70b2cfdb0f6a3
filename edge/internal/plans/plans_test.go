package plans

import (
	"strings"
	"testing"
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
