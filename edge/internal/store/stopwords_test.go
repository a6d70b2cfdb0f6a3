package store

import (
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema/testkit"
)

// The index leaves a stop word out only where the tokenizer makes it a word of its own, and
// keeps everything else as the tokenizer reads it: each text's words are read back from a
// real FTS5 table with search.db's tokenizer.
func TestIndexedTextLeavesOutStopWords(t *testing.T) {
	c, err := OpenConn(":memory:", sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE)
	testkit.NoErr(t, err)
	defer c.Close()
	testkit.NoErr(t, c.Exec(`CREATE VIRTUAL TABLE f USING fts5(text, content = '', tokenize = 'unicode61 remove_diacritics 2', detail = none);
		CREATE VIRTUAL TABLE v USING fts5vocab(f, 'row')`))
	for _, tc := range []struct{ text, want string }{
		{"I have a question about my order", "order question"},
		{"THE Order, The end. AND", "end order"},
		{"I'm here; it's fine", "fine here m s"},
		{"a1 b2 is x2", "a1 b2 x2"},                 // a digit joins the letters
		{"à la carte, the café", "a cafe carte la"}, // "à" is not ASCII: kept (folded to a)
		{"theory then-there notebook not", "notebook theory"},
		{"naïve is über", "naive uber"},
		{"the", ""},
		{"", ""},
		{"the\tend\n", "end"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			testkit.NoErr(t, c.Exec(`INSERT INTO f (f) VALUES ('delete-all')`))
			testkit.NoErr(t, execConn(c, `INSERT INTO f (rowid, text) VALUES (1, ?)`, string(appendIndexed(nil, 7, tc.text))))
			st, _, err := c.Prepare(`SELECT term FROM v ORDER BY term`)
			testkit.NoErr(t, err)
			var got []string
			testkit.NoErr(t, eachRow(st, nil, func() error { got = append(got, st.ColumnText(0)); return nil }))
			st.Close()
			want := strings.Fields("0site7 " + tc.want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("indexed %q; want %q", got, want)
			}
		})
	}
}

func TestIsStopWord(t *testing.T) {
	for w := range stopWords {
		if len(w) > stopWordMax || w != fold(w) {
			t.Errorf("%q: longer than stopWordMax or not folded", w)
		}
	}
	for _, c := range []struct {
		w    string
		stop bool
	}{{"the", true}, {"i", true}, {"theory", false}, {"order", false}, {"", false}, {"should", true}} {
		if isStopWord(c.w) != c.stop {
			t.Errorf("isStopWord(%q) = %v", c.w, !c.stop)
		}
	}
}

// fold's ASCII path gives what the decomposing one does.
func TestFoldASCII(t *testing.T) {
	for _, w := range []string{"", "a", "Order", "ORDER", "w00042", "x-Y_z!", "Hello World", "\x7f\x01AbC"} {
		if got, want := fold(w), foldMarks(w); got != want {
			t.Errorf("fold(%q) = %q; want %q", w, got, want)
		}
	}
	for _, c := range []struct{ in, want string }{{"Café", "cafe"}, {"ÉCOLE", "ecole"}, {"Straße", "straße"}} {
		if got := fold(c.in); got != c.want {
			t.Errorf("fold(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}
