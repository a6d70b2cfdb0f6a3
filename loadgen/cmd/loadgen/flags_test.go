package main

import (
	"reflect"
	"testing"
)

func TestParseFlags(t *testing.T) {
	r, err := parseRates("1000, 5000,10000,")
	if err != nil || !reflect.DeepEqual(r, []float64{1000, 5000, 10000}) {
		t.Fatalf("%v %v", r, err)
	}
	for _, bad := range []string{"", "x", "100,-1", "0"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
	p, err := parsePIDs("12, 34")
	if err != nil || !reflect.DeepEqual(p, []int{12, 34}) {
		t.Fatalf("%v %v", p, err)
	}
	if _, err := parsePIDs("12,x"); err == nil {
		t.Error("bad pid accepted")
	}
	for in, want := range map[string]int{"http://127.0.0.1:8080": 8080, "http://localhost": 80, "https://x.test": 443} {
		if got, err := edgePort(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
}
