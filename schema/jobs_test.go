package schema

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

var jobSamples = []string{
	`{"id":"m1234.slack","lane":"chat","target":"slack","site_id":7,"conversation_id":99,"message_id":1234,"author":"visitor","name":"","text":"Hello \u003cb\u003e \"you\" \n é 😀 \ud83d\ude00","created_at":"2026-12-02T10:00:00.123Z","first":true,"inbox_url":"https://chat.example.com/app/#/conversations/99"}`,
	`{"id":"m5.email","lane":"email","target":"email","site_id":1,"conversation_id":2,"message_id":5,"author":"operator","name":"Ann","text":"hi","created_at":"2026-12-02T10:00:00+01:00","to":"v@example.com"}`,
	` {"ID":"upper","Text":"folded keys"} `,
	`{"id":"x","extra":{"nested":[1,2,{"a":"}"}]},"site_id":-3,"first":false,"name":null}`,
	`{"id":"x","site_id":1.5}`,
	`{"id":"x","site_id":01}`,
	`{"id":"x","text":"lone \ud800 surrogate"}`,
	`{"id":"x","created_at":"2026-13-02T10:00:00Z"}`,
	`{"id":"x","created_at":null}`,
	`{"id":"bad \x01 control"}`,
	`{"id":"x"`,
	`[]`,
	``,
}

// DecodeJob must read exactly what encoding/json reads whenever encoding/json can read it.
func TestDecodeJobAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range jobSamples {
		checkJob(t, []byte(in))
	}
	var j Job
	if err := DecodeJob([]byte(jobSamples[0]), &j); err != nil || j.Text != "Hello <b> \"you\" \n é 😀 😀" || !j.First ||
		!j.CreatedAt.Equal(time.Date(2026, 12, 2, 10, 0, 0, 123e6, time.UTC)) {
		t.Errorf("DecodeJob: %+v, %v", j, err)
	}
}

func FuzzDecodeJob(f *testing.F) {
	for _, in := range jobSamples {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkJob(t, b) })
}

func checkJob(t *testing.T, b []byte) {
	t.Helper()
	var want, got Job
	wantErr := json.Unmarshal(b, &want)
	err := DecodeJob(b, &got)
	if wantErr == nil && (err != nil || !reflect.DeepEqual(got, want)) {
		t.Errorf("%q:\n got %+v, %v\nwant %+v", b, got, err, want)
	}
}

func BenchmarkDecodeJob(b *testing.B) {
	in := []byte(jobSamples[0])
	b.ReportAllocs()
	for b.Loop() {
		var j Job
		_ = DecodeJob(in, &j)
	}
}

func BenchmarkDecodeJobEncodingJSON(b *testing.B) {
	in := []byte(jobSamples[0])
	b.ReportAllocs()
	for b.Loop() {
		var j Job
		_ = json.Unmarshal(in, &j)
	}
}

func TestResultSubjectIsOneToken(t *testing.T) {
	for id, want := range map[string]string{"w1": "results.w1", "box1.example.com-2": "results.box1_example_com-2", "a b>*": "results.a_b__", "é": "results.__"} {
		if got := ResultSubject(id); got != want {
			t.Errorf("ResultSubject(%q) = %q, want %q", id, got, want)
		}
	}
}
