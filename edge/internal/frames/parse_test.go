package frames

import (
	"encoding/json"
	"testing"

	"spookat/schema"
)

// The fast path agrees with encoding/json on every input: same frame, or both refuse.
func FuzzParseClient(f *testing.F) {
	for _, s := range []string{
		`{"type":"message","client_id":"c-1","text":"hello"}`,
		`{ "type" : "resume" , "after_message_id" : 42 }`,
		`{"type":"message","client_id":"c","text":"quote \" and \\ and \n"}`,
		`{"type":"message","client_id":"é日本","text":"<img src=x>"}`,
		`{"type":"resume","after_message_id":-1}`,
		`{"type":"resume","after_message_id":1.5}`,
		`{"type":"message","extra":{"a":1},"text":"x"}`,
		`{"type":`, `[]`, `{}`, `{"type":"message"}x`, `{"Type":"message"}`, `{"text":"\u00e9"}`,
		`{"after_message_id":99999999999999999999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want schema.ClientFrame
		errGot := ParseClient(data, &got)
		errWant := json.Unmarshal(data, &want)
		if (errGot == nil) != (errWant == nil) {
			t.Fatalf("%q: ParseClient err %v, encoding/json err %v", data, errGot, errWant)
		}
		if errWant == nil && got != want {
			t.Fatalf("%q: ParseClient %+v, encoding/json %+v", data, got, want)
		}
		// The frame must not alias the buffer, which the next read overwrites.
		for i := range data {
			data[i] = 'X'
		}
		if errWant == nil && got != want {
			t.Fatalf("the parsed frame changed with its buffer: %+v, want %+v", got, want)
		}
	})
}

func BenchmarkParseClient(b *testing.B) {
	data := []byte(`{"type":"message","client_id":"0b6f0c1e-5d2a-4d43-9a55-2f1c7c4b9d10","text":"Hello, I have a question about my order"}`)
	var f schema.ClientFrame
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ParseClient(data, &f)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Unmarshal(data, &f)
		}
	})
}
