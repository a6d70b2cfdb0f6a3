package store

import (
	"slices"
	"testing"

	"spookat/schema"
)

// The feed holds every indexable message above its base, or tells the pass to read the
// database: below its base, after a commit with a message it was not given, and once it
// outgrows a pass.
func TestFeed(t *testing.T) {
	msg := func(id int64, kind schema.MessageKind, text string) Committed {
		return Committed{MessageID: id, SiteID: 7, Kind: kind, Text: text}
	}
	ids := func(rows []feedRow) []int64 {
		var out []int64
		for _, r := range rows {
			out = append(out, r.id)
		}
		return out
	}
	cases := []struct {
		name    string
		commits func(f *feed)
		through int64
		ok      bool
		rows    []int64
		newest  int64
	}{
		{"indexable messages only, newest of all", func(f *feed) {
			f.add([]Committed{msg(11, "", "hello"), msg(12, schema.KindClosed, "")}, 11, 12)
			f.add([]Committed{msg(13, "", ""), msg(14, "", "again")}, 13, 14)
		}, 10, true, []int64{11, 14}, 14},
		{"an index behind the base", func(f *feed) {
			f.add([]Committed{msg(11, "", "hello")}, 11, 11)
		}, 9, false, nil, 0},
		{"a commit's message not given", func(f *feed) {
			f.add([]Committed{msg(11, "", "hello")}, 11, 11)
			f.add([]Committed{msg(13, "", "hi")}, 12, 13) // 12 was written by a Write's own INSERT
		}, 10, false, nil, 0},
		{"the index through the dropped ones", func(f *feed) {
			f.add([]Committed{msg(11, "", "hello")}, 11, 11)
			f.add([]Committed{msg(13, "", "hi")}, 12, 13)
			f.add([]Committed{msg(14, "", "there")}, 14, 14)
		}, 13, true, []int64{14}, 14},
		{"more than a pass takes", func(f *feed) {
			f.add([]Committed{msg(11, "", "a"), msg(12, "", "b")}, 11, 12)
			f.add([]Committed{msg(13, "", "c"), msg(14, "", "d")}, 13, 14)
		}, 10, false, nil, 0},
		{"a pass that forgets", func(f *feed) {
			f.add([]Committed{msg(11, "", "hello")}, 11, 11)
			f.drop()
		}, 10, false, nil, 0},
		{"nothing new", func(f *feed) {}, 12, true, nil, 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &feed{base: 10, upto: 10, max: 3}
			c.commits(f)
			spare := make([]feedRow, 1, 4)
			rows, newest, ok := f.take(c.through, spare)
			if ok != c.ok || !slices.Equal(ids(rows), c.rows) || newest != c.newest {
				t.Fatalf("take(%d) = %v, %d, %v; want %v, %d, %v", c.through, ids(rows), newest, ok, c.rows, c.newest, c.ok)
			}
			if ok && (len(f.rows) != 0 || cap(f.rows) != cap(spare)) {
				t.Fatalf("after take the feed holds %d rows in room of %d; want none, in the spare's room", len(f.rows), cap(f.rows))
			}
		})
	}
}
