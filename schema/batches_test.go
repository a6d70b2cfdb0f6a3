package schema

import "testing"

func TestBatchID(t *testing.T) {
	for _, c := range []struct {
		lane    string
		part    int
		through int64
	}{{LaneChat, 7, 1234}, {LaneEmail, 0, 1}, {LaneWebhook, 15, 1 << 40}} {
		id := BatchID(c.lane, c.part, c.through)
		if got, ok := BatchThrough(id); !ok || got != c.through {
			t.Errorf("BatchThrough(%q) = %d, %v; want %d", id, got, ok, c.through)
		}
	}
	for _, bad := range []string{"", "w", "m12.slack", "wx.chat.1", "12.chat.1"} {
		if _, ok := BatchThrough(bad); ok {
			t.Errorf("BatchThrough(%q) accepted", bad)
		}
	}
}

func TestSplitJobs(t *testing.T) {
	var got []string
	SplitJobs(true, []byte("{\"a\":1}\n\n {\"b\":2}\n"), func(l []byte) { got = append(got, string(l)) })
	if len(got) != 2 || got[0] != `{"a":1}` || got[1] != ` {"b":2}` {
		t.Errorf("batch lines %q", got)
	}
	got = nil
	SplitJobs(false, []byte("{\"a\":1}\n{\"b\":2}"), func(l []byte) { got = append(got, string(l)) })
	if len(got) != 1 {
		t.Errorf("a single job split into %q", got)
	}
}
