package server_test

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/brakes"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

const rulesFile = "../../../ops/prometheus/spookat.rules.yml"

var (
	ruleSelector = regexp.MustCompile(`\b(spookat_[a-z0-9_]+)(\{[^}]*\})?`)
	ruleMatcher  = regexp.MustCompile(`(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"`)
	sampleLine   = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? `)
)

// Every spookat_ series an alert rule reads is one the edge exports, with the labels the rule
// matches on: a renamed metric or label would leave an alert that never fires. The edge is
// braked and sent a refused message first, so the series that exist only then are there too.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	testkit.NoErr(t, err)
	e := edgetest.Start(t, "", server.Config{StreamStatsEvery: 100 * time.Millisecond,
		Brakes: brakes.Config{FloodThreshold: 1, FloodDivisor: 10, FloodMaxLevel: 3}})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "rules", Origins: []string{"http://site.test"}})
	for i, want := range []string{"ack", "error"} { // the second new conversation is braked
		v := edgetest.Dial(t, e.Addr, site.Key, "")
		v.Message(t, "first", "hello")
		if f := v.Read(t); f.Type != want {
			t.Fatalf("conversation %d: %+v, want %s", i+1, f, want)
		}
	}

	samples := map[string][]string{} // series name → label sets
	testkit.WaitFor(t, "stream use in /metrics", 10*time.Second, func() bool {
		resp, err := http.Get("http://" + e.MetricsAddr + "/metrics")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		clear(samples)
		for _, line := range strings.Split(string(body), "\n") {
			if m := sampleLine.FindStringSubmatch(line); m != nil {
				samples[m[1]] = append(samples[m[1]], m[2])
			}
		}
		return len(samples["spookat_stream_bytes"]) == 4 // JOBS, RESULTS, DEAD, INBOUND
	})

	exprs := 0
	for _, line := range strings.Split(string(rules), "\n") {
		expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:")
		if !ok {
			continue
		}
		exprs++
		for _, sel := range ruleSelector.FindAllStringSubmatch(expr, -1) {
			name, labels := sel[1], sel[2]
			sets, ok := samples[name]
			if !ok {
				t.Errorf("rule %q reads %s, which the edge does not export", strings.TrimSpace(expr), name)
				continue
			}
			for _, m := range ruleMatcher.FindAllStringSubmatch(labels, -1) {
				label, op, value := m[1], m[2], m[3]
				var values []string
				switch op {
				case "=":
					values = []string{value}
				case "=~":
					values = strings.Split(value, "|")
				}
				for _, v := range values {
					if !hasLabel(sets, label, v) {
						t.Errorf("rule %q matches %s{%s=%q}: no such series on /metrics (%v)", strings.TrimSpace(expr), name, label, v, sets)
					}
				}
				if len(values) == 0 && !hasLabel(sets, label, "") {
					t.Errorf("rule %q matches on label %s, which %s does not have", strings.TrimSpace(expr), label, name)
				}
			}
		}
	}
	if exprs < 8 {
		t.Fatalf("%d rules read from %s, want at least 8", exprs, rulesFile)
	}
}

// hasLabel reports whether a label set has label, with value v (or any value when v is "").
// Label values this edge fills only when it happens (frame error codes) are checked by name.
func hasLabel(sets []string, label, v string) bool {
	for _, s := range sets {
		if v != "" && strings.Contains(s, label+`="`+v+`"`) || v == "" && strings.Contains(s, label+`="`) {
			return true
		}
	}
	return v != "" && label == "code" && hasLabel(sets, label, "")
}
