package slack

import (
	"encoding/json"
	"testing"
)

var answers = []string{
	`{"ok":true,"channel":"C1","ts":"1733130000.000100","message":{"type":"message","text":"a \"quoted\" }{ ][ text","ts":"1733130000.000100","blocks":[{"type":"rich_text","elements":[]}]}}`,
	`{"ok":false,"error":"channel_not_found"}`,
	`{"ok":false,"error":"ratelimited","response_metadata":{"messages":["[ERROR] slow down"]}}`,
	` { "ok" : true , "ts" : "1.2" , "warning" : "superfluous_charset" } `,
	`{"ts":"9.9","ok":true,"n":12.5e3,"t":true,"f":false,"z":null}`,
	`{"ok":true,"ts":"1\u002e2"}`,
	`{"ok":false,"error":"bad\nline"}`,
	`{}`,
	`<html>bad gateway</html>`,
	`{"ok":true,"ts":"1.2"`,
	`{"ok":tru}`,
	``,
}

// decodeAnswer must read exactly what encoding/json reads whenever encoding/json can read it.
func TestDecodeAnswerAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range answers {
		checkAnswer(t, []byte(in))
	}
	if a, err := decodeAnswer([]byte(answers[0])); err != nil || a.TS != "1733130000.000100" || !a.OK {
		t.Errorf("the usual answer: %+v %v", a, err)
	}
}

func FuzzDecodeAnswer(f *testing.F) {
	for _, in := range answers {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAnswer(t, b) })
}

func checkAnswer(t *testing.T, b []byte) {
	t.Helper()
	var want answer
	wantErr := json.Unmarshal(b, &want)
	got, err := decodeAnswer(b)
	if wantErr == nil && (err != nil || got != want) {
		t.Errorf("%q: got %+v, %v; encoding/json read %+v", b, got, err, want)
	}
}

func BenchmarkDecodeAnswer(b *testing.B) {
	in := []byte(answers[0])
	b.ReportAllocs()
	for b.Loop() {
		_, _ = decodeAnswer(in)
	}
}

func BenchmarkDecodeAnswerEncodingJSON(b *testing.B) {
	in := []byte(answers[0])
	b.ReportAllocs()
	for b.Loop() {
		var a answer
		_ = json.Unmarshal(in, &a)
	}
}
