package schema

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"spookat/schema/testkit"
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
	`{"id":"m4.webhook","author":"system","text":"Rated","kind":"rating"}`,
	`{"id":"m1.slack","first":true,"context":{"url":"https://x.test/","title":"T","user_agent":"Mozilla","browser":"Chrome 1","at":5}}`,
	`{"id":"m3.slack","text":"","file":{"id":"k","name":"a.png","type":"image/png","size":3,"url":"https://x.test/v1/files/k?exp=1"}}`,
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

var resultSamples = []string{
	`{"job_id":"m1234.slack","target":"slack","site_id":7,"conversation_id":99,"message_id":1234,"status":"delivered","attempts":1,"external_id":"1733130000.000100","thread_id":"1733130000.000100","at":"2026-12-02T10:00:00.456Z"}`,
	`{"job_id":"m1235.webhook","target":"webhook","site_id":7,"conversation_id":99,"message_id":1235,"status":"retrying","attempts":3,"error":"webhook: http 503 \"busy\" \u00e9","merged":4,"at":"2026-12-02T10:00:00.457+01:00"}`,
	`{"JOB_ID":"folded","Status":"dead"}`,
	`{"job_id":"x","extra":[1,{"a":"}"}],"attempts":-2,"error":null}`,
	`{"job_id":"x","attempts":1.5}`,
	`{"job_id":"x","merged":01}`,
	`{"job_id":"x","at":"yesterday"}`,
	`{"job_id":"x","at":null}`,
	`{"job_id":"x"`,
	`[]`,
	``,
}

// DecodeResult must read exactly what encoding/json reads whenever encoding/json can read it.
func TestDecodeResultAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range resultSamples {
		checkResult(t, []byte(in))
	}
	var r Result
	if err := DecodeResult([]byte(resultSamples[1]), &r); err != nil || r.Error != `webhook: http 503 "busy" é` || r.Merged != 4 || r.Attempts != 3 {
		t.Errorf("DecodeResult: %+v, %v", r, err)
	}
}

func FuzzDecodeResult(f *testing.F) {
	for _, in := range resultSamples {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkResult(t, b) })
}

func checkResult(t *testing.T, b []byte) {
	t.Helper()
	var want, got Result
	wantErr := json.Unmarshal(b, &want)
	err := DecodeResult(b, &got)
	if wantErr == nil && (err != nil || !reflect.DeepEqual(got, want)) {
		t.Errorf("%q:\n got %+v, %v\nwant %+v", b, got, err, want)
	}
}

func TestAppendJobMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123000, time.UTC)
	for _, j := range []Job{
		{ID: "m1.slack", Lane: LaneChat, Target: TargetSlack, SiteID: 1, ConversationID: 2, MessageID: 1, Author: "visitor",
			Text: "Hello <b> \"you\" \n é 😀 \u2028 \x01 \xff", CreatedAt: at, First: true, Reopened: true, InboxURL: "https://x.test/app/#/conversations/2?a=1&b=2",
			Context: &VisitorContext{URL: "https://x.test/p?a=1&b=<2>", Title: "Prix \u2028 é", Browser: "Chrome 131 on macOS", At: 1}},
		{ID: "m9.email", Lane: LaneEmail, Target: TargetEmail, SiteID: 7, ConversationID: 8, MessageID: 9, Author: "operator",
			Name: "Ann", Text: "", CreatedAt: at.In(time.FixedZone("x", 3600)), To: "v@example.com", MaybeRepeat: true},
		{ID: "m10.discord", Lane: LaneChat, Target: TargetDiscord, SiteID: 7, ConversationID: 8, MessageID: 10, Author: "visitor",
			CreatedAt: at, File: &File{ID: "k", Name: `shot "1".png`, Type: "image/png", Size: 4096, URL: "https://x.test/v1/files/k?exp=1&sig=a%2B"}},
		{ID: "m11.email", Lane: LaneEmail, Target: TargetEmail, SiteID: 7, ConversationID: 8, MessageID: 11, Author: "system",
			Name: "Transcript", Text: "Transcript sent", CreatedAt: at, Kind: KindTranscript, To: "v@example.com", Transcript: &Transcript{Earlier: 2,
				Lines: []TranscriptLine{{Author: "visitor", Text: "hi <b>", At: at}, {Author: "operator", Name: "Ann", Text: "", File: "a.png", At: at}}}},
		{},
	} {
		want, err := json.Marshal(&j)
		testkit.NoErr(t, err)
		if got := AppendJob(nil, &j); string(got) != string(want) {
			t.Errorf("AppendJob\n got %s\nwant %s", got, want)
		}
	}
}
