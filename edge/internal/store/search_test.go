package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/ncruces/go-sqlite3"

	"spookat/schema"
	"spookat/schema/testkit"
)

func TestMatchExpr(t *testing.T) {
	const site = `"0site7"`
	for _, c := range []struct{ in, want, err string }{
		// A word being typed is checked on the text, not asked of the index.
		{"refund", site, ""},
		{"refund ", site + ` AND "refund"`, ""},
		// Stop words are not in the index: checked on the text too.
		{"where is my ord", site + ` AND "where"`, ""},
		{`"my order" late`, site + ` AND "order"`, ""},
		{`"my order"`, site + ` AND "order"`, ""},
		{`"MY Order"`, site + ` AND "Order"`, ""},
		{`"my ord`, site, ""},
		{"the ", site, ""},
		// A last word under three letters is a word, not a prefix.
		{"re", site + ` AND "re"`, ""},
		{"where is my re", site + ` AND "where" AND "re"`, ""},
		{`"my re`, site + ` AND "re"`, ""},
		{"éco ", site + ` AND "éco"`, ""},
		// Syntax in the input is text: operators, columns, quotes, stars.
		{`site:1 OR NOT x* (yes) `, site + ` AND "site" AND "1" AND "x" AND "yes"`, ""},
		{`site:1 ORDER NOTE `, site + ` AND "site" AND "1" AND "ORDER" AND "NOTE"`, ""},
		{`ab"cde`, site + ` AND "ab"`, ""},
		{`- * ""  `, "", "Type a word"},
		{"", "", "Type a word"},
		{"a b c d e f g h i", "", "at most 8"},
		{strings.Repeat("x", 201), "", "at most 200"},
	} {
		t.Run(c.in, func(t *testing.T) {
			terms, err := parseQuery(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadQuery) {
					t.Fatalf("got %v, %v; want an ErrBadQuery saying %q", terms, err, c.err)
				}
				return
			}
			if got := matchExpr(7, terms); err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// Search over a real store: words, prefixes, phrases and accents match; another site's
// messages and status lines never do; status and dates filter; the best message of a
// conversation's newest match is highlighted, newest first; an operator of another site
// finds nothing.
func TestSearch(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	defer func() { s.Close() }()
	ctx := context.Background()
	site, other := addSite(t, s), addSite(t, s)
	var op, stranger *Operator
	if err := s.Write(ctx, func(tx *Tx) (err error) {
		if op, err = tx.AddOperator("ann@example.com", "Ann", "correct horse battery", []string{site.Key}); err != nil {
			return err
		}
		stranger, err = tx.AddOperator("bob@example.com", "Bob", "correct horse battery", []string{other.Key})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const day = 86_400_000
	n := 0
	say := func(site *Site, conv int64, text string, at int64) MessageResult {
		t.Helper()
		n++
		tok := fmt.Sprintf("%032d", conv)
		r := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(tok), Author: schema.AuthorVisitor, Text: text, ClientID: fmt.Sprint("c", n)})
		if err := s.Write(ctx, func(tx *Tx) error {
			return tx.exec(`UPDATE messages SET created_at = ? WHERE id = ?`, at, r.MessageID)
		}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	order := say(site, 1, "Where is my order? It was due on Monday.", 1*day)
	again := say(site, 1, "Still waiting for the order, please answer", 1*day+1)
	refund := say(site, 2, "I would like a refund for the café crème machine", 2*day)
	late := say(site, 3, "My order is late and the box was damaged", 3*day)
	say(other, 4, "Where is my order? another site's secret", 3*day)
	if _, err := s.SetStatus(ctx, site.ID, refund.ConversationID, schema.KindClosed, "Ann", schema.SourceInbox); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Assign(ctx, site.ID, late.ConversationID, op.ID, "Ann", "Ann"); err != nil {
		t.Fatal(err)
	}
	other4 := say(other, 5, "hello", 3*day)
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		if err := tx.exec(`UPDATE visitors SET name = 'Zoë Müller', email = 'zoe@shop.example', user_id = 'u-4711' WHERE id = ?`, order.VisitorID); err != nil {
			return err
		}
		return tx.exec(`UPDATE visitors SET name = 'Zoë Secret', email = 'zoe@other.example' WHERE id = ?`, other4.VisitorID)
	}))
	if err := s.IndexNow(ctx); err != nil {
		t.Fatal(err)
	}

	text := func(segs []Segment) string {
		var b strings.Builder
		for _, g := range segs {
			if g.Match {
				b.WriteString("[" + g.Text + "]")
			} else {
				b.WriteString(g.Text)
			}
		}
		return b.String()
	}
	for _, c := range []struct {
		name  string
		q     SearchQuery
		convs []int64 // newest match first
		first string  // the first hit's highlighted snippet
	}{
		{"word", SearchQuery{Text: "refund "}, []int64{refund.ConversationID}, "I would like a [refund] for the café crème machine"},
		{"prefix", SearchQuery{Text: "ref"}, []int64{refund.ConversationID}, "I would like a [refund] for the café crème machine"},
		{"accents fold", SearchQuery{Text: "cafe creme "}, []int64{refund.ConversationID}, "I would like a refund for the [café] [crème] machine"},
		{"phrase", SearchQuery{Text: `"my order" `}, []int64{late.ConversationID, order.ConversationID}, ""},
		{"a phrase's words apart", SearchQuery{Text: `"order late"`}, nil, ""},
		{"a phrase's last word a prefix", SearchQuery{Text: `"is lat`}, []int64{late.ConversationID}, ""},
		{"two words, any order", SearchQuery{Text: "damaged box "}, []int64{late.ConversationID}, "My order is late and the [box] was [damaged]"},
		// Stop words are not in the index; the walk checks them on the text.
		{"a stop word alone", SearchQuery{Text: "the "}, []int64{late.ConversationID, refund.ConversationID, order.ConversationID}, "My order is late and [the] box was damaged"},
		{"a stop word in capitals", SearchQuery{Text: "IT "}, []int64{order.ConversationID}, "Where is my order? [It] was due on Monday."},
		{"a phrase of stop words and a word", SearchQuery{Text: `"for the café"`}, []int64{refund.ConversationID}, "I would like a refund [for] [the] [café] crème machine"},
		{"stop words and a word", SearchQuery{Text: "the box "}, []int64{late.ConversationID}, ""},
		{"a stop word the text lacks", SearchQuery{Text: "would box "}, nil, ""},
		{"status", SearchQuery{Text: "order ", Status: "closed"}, nil, ""},
		{"status open", SearchQuery{Text: "machine ", Status: "open"}, nil, ""},
		{"status closed", SearchQuery{Text: "machine ", Status: "closed"}, []int64{refund.ConversationID}, ""},
		{"from", SearchQuery{Text: "order ", From: 2 * day}, []int64{late.ConversationID}, ""},
		{"to", SearchQuery{Text: "order ", To: 1*day + 1}, []int64{order.ConversationID}, ""},
		{"empty range", SearchQuery{Text: "order ", From: 3*day + 1}, nil, ""},
		{"another site's words", SearchQuery{Text: "secret "}, nil, ""},
		{"status lines are not text", SearchQuery{Text: "closed "}, nil, ""},
		{"assigned to Ann", SearchQuery{Text: "order ", AssignedTo: op.ID}, []int64{late.ConversationID}, ""},
		{"unassigned", SearchQuery{Text: "order ", Unassigned: true}, []int64{order.ConversationID}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := s.Search(ctx, op.ID, site.ID, c.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, h := range res.Hits {
				got = append(got, h.Conversation.ID)
				if h.Conversation.SiteID != site.ID || len(h.Snippet) == 0 {
					t.Fatalf("hit %+v: want one of site %d with a snippet", h, site.ID)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.convs) {
				t.Fatalf("conversations %v; want %v", got, c.convs)
			}
			if c.first != "" && text(res.Hits[0].Snippet) != c.first {
				t.Fatalf("snippet %q; want %q", text(res.Hits[0].Snippet), c.first)
			}
		})
	}

	t.Run("one hit per conversation, its newest match", func(t *testing.T) {
		res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "order "})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) != 2 || res.Next != 0 || res.Hits[1].MessageID != again.MessageID {
			t.Fatalf("%+v; want 2 hits, the second on message %d, and no next page", res, again.MessageID)
		}
		if got := text(res.Hits[1].Snippet); got != "Still waiting for the [order], please answer" {
			t.Fatalf("snippet %q", got)
		}
	})
	t.Run("people: name, email, user id", func(t *testing.T) {
		for _, c := range []struct {
			q, want string
		}{
			{"zoe", "[Zoë] Müller · [zoe]@shop.example · u-4711"},
			{"müller ", "Zoë [Müller] · zoe@shop.example · u-4711"},
			{"4711 ", "Zoë Müller · zoe@shop.example · u-[4711]"},
			{"zoe@shop.example", "[Zoë] Müller · [zoe]@[shop].[example] · u-4711"},
			{"secret ", ""}, // the other site's visitor
			{"zoe other ", ""},
		} {
			res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: c.q})
			testkit.NoErr(t, err)
			if c.want == "" {
				if len(res.People) != 0 {
					t.Errorf("%q: %+v; want nobody", c.q, res.People)
				}
				continue
			}
			if len(res.People) != 1 || res.People[0].Conversation.ID != order.ConversationID || text(res.People[0].Snippet) != c.want {
				t.Errorf("%q: %+v; want conversation %d as %q", c.q, res.People, order.ConversationID, c.want)
			}
		}
		res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "zoe", Status: schema.ConvClosed})
		if err != nil || len(res.People) != 0 {
			t.Errorf("%+v %v: the closed filter kept an open conversation's visitor", res.People, err)
		}
	})
	t.Run("not a member", func(t *testing.T) {
		res, err := s.Search(ctx, stranger.ID, site.ID, SearchQuery{Text: "order "})
		if err != nil || len(res.Hits) != 0 || res.Next != 0 {
			t.Fatalf("%+v, %v; want nothing for an operator of another site", res, err)
		}
	})
	t.Run("the index survives a reopen and a rebuild", func(t *testing.T) {
		requireIndexAgrees(t, s)
		testkit.NoErr(t, s.Close())
		for _, f := range []string{SearchFileName, SearchFileName + "-wal", SearchFileName + "-shm"} {
			_ = os.Remove(filepath.Join(dir, f)) // a restored data directory has none
		}
		s = openTest(t, dir, Options{})
		testkit.NoErr(t, s.IndexNow(ctx))
		requireIndexAgrees(t, s)
		// An index of another copy of the database (a stray row shows whether it was kept).
		testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { return tx.exec(`UPDATE search_file SET token = 'another copy'`) }))
		testkit.NoErr(t, s.Close())
		c, err := OpenConn(filepath.Join(dir, SearchFileName), sqlite3.OPEN_READWRITE)
		testkit.NoErr(t, err)
		testkit.NoErr(t, c.Exec(`INSERT INTO messages_fts (rowid, text) VALUES (999999, '0site1 a stray row')`))
		testkit.NoErr(t, c.Close())
		s = openTest(t, dir, Options{})
		requireIndexAgrees(t, s)
		res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "damaged"})
		if err != nil || len(res.Hits) != 1 || res.Hits[0].MessageID != late.MessageID {
			t.Fatalf("%+v, %v; want message %d", res, err, late.MessageID)
		}
		// An index of this database in the schema of an older edge (version 1: the site in
		// a column of its own, detail=column), with a stray row.
		var token string
		testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
			st, err := q.Stmt(`SELECT token FROM search_file`)
			if err == nil {
				_, err = queryRow(st, nil, &token)
			}
			return err
		}))
		testkit.NoErr(t, s.Close())
		for _, f := range []string{SearchFileName, SearchFileName + "-wal", SearchFileName + "-shm"} {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		c, err = OpenConn(filepath.Join(dir, SearchFileName), sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE)
		testkit.NoErr(t, err)
		testkit.NoErr(t, c.Exec(`CREATE VIRTUAL TABLE messages_fts USING fts5(site, text, content = '', columnsize = 0, detail = column);
			CREATE TABLE search_index (id INTEGER PRIMARY KEY, token TEXT NOT NULL, through INTEGER NOT NULL, forgot INTEGER NOT NULL);
			INSERT INTO messages_fts (rowid, site, text) VALUES (999999, '1', 'a stray row');
			PRAGMA user_version = 1`))
		testkit.NoErr(t, execConn(c, `INSERT INTO search_index VALUES (1, ?, 0, 0)`, token))
		testkit.NoErr(t, c.Close())
		s = openTest(t, dir, Options{})
		requireIndexAgrees(t, s)
		res, err = s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "damaged"})
		if err != nil || len(res.Hits) != 1 || res.Hits[0].MessageID != late.MessageID {
			t.Fatalf("%+v, %v; want message %d", res, err, late.MessageID)
		}
	})
}

// Pages: 20 conversations a page, Next goes on where the page stopped, and a walk that
// reads the whole window of matches without filling a page still says where to go on.
func TestSearchPages(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	site := addSite(t, s)
	op := addAnn(t, s, site)
	for i := range 25 {
		for j := range 1 + i%3 {
			submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(fmt.Sprintf("%032d", i)), Author: schema.AuthorVisitor,
				Text: fmt.Sprintf("parcel %d, message %d", i, j), ClientID: fmt.Sprint("p", i, "-", j)})
		}
	}
	if err := s.IndexNow(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var before int64
	for page, want := range []int{20, 5} {
		res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "parcel ", Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) != want || (page == 0) != (res.Next > 0) {
			t.Fatalf("page %d: %d hits, next %d; want %d", page, len(res.Hits), res.Next, want)
		}
		for _, h := range res.Hits {
			if seen[h.Conversation.ID] {
				t.Fatalf("page %d: conversation %d again", page, h.Conversation.ID)
			}
			seen[h.Conversation.ID] = true
		}
		before = res.Next
	}

	// One conversation with more matches than the window: a page of one hit, and a next.
	conv := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(fmt.Sprintf("%032d", 99)), Author: schema.AuthorVisitor,
		Text: "crate 0", ClientID: "crate-0"})
	if err := s.Write(ctx, func(tx *Tx) error {
		for i := range SearchWindow {
			var res MessageResult
			if _, err := tx.insertMessage(&MessageRequest{SiteID: site.ID, VisitorID: conv.VisitorID, ConversationID: conv.ConversationID,
				Author: schema.AuthorVisitor, Text: fmt.Sprint("crate ", i+1), ClientID: fmt.Sprint("crate-", i+1)}, &res); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.IndexNow(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "crate "})
	if err != nil || len(res.Hits) != 1 || res.Next != conv.MessageID+1 {
		t.Fatalf("%+v, %v; want one hit and next %d", res, err, conv.MessageID+1)
	}
	res, err = s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "crate ", Before: res.Next})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].MessageID != conv.MessageID || res.Next != 0 {
		t.Fatalf("%+v, %v; want message %d and no next", res, err, conv.MessageID)
	}
}

// The index and the messages agree: FTS5's integrity check compares every indexed row with
// the text it came from.
func TestSearchIndexIntegrity(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	site := addSite(t, s)
	for i := range 50 {
		submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(fmt.Sprintf("%032d", i%7)), Author: schema.AuthorVisitor,
			Text: fmt.Sprintf("message %d about the invoice number %d", i, i*7), ClientID: fmt.Sprint("i", i)})
	}
	if _, err := s.SetStatus(context.Background(), site.ID, 1, schema.KindClosed, "Ann", schema.SourceInbox); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, Options{})
	defer s.Close()
	requireIndexAgrees(t, s)
}

// requireIndexAgrees brings the search index up to date and checks it against the messages:
// FTS5's integrity check of search.db, the index's rows are the indexable messages', and each
// message matches its site and every word of its text.
func requireIndexAgrees(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	testkit.NoErr(t, s.IndexNow(ctx))
	c, err := OpenConn(s.idx.path, sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	defer c.Close()
	testkit.NoErr(t, c.BusyTimeout(5*time.Second))
	if err = c.Exec(`INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 0)`); err != nil {
		t.Fatalf("integrity check: %v", err)
	}
	// A contentless index cannot be scanned: its rows are the documents of its words.
	testkit.NoErr(t, c.Exec(`CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, messages_fts, 'instance')`))
	st, _, err := c.Prepare(`SELECT DISTINCT doc FROM temp.words`)
	testkit.NoErr(t, err)
	var held []int64
	testkit.NoErr(t, eachRow(st, nil, func() error { held = append(held, st.ColumnInt64(0)); return nil }))
	st.Close()
	testkit.NoErr(t, s.Read(ctx, func(q Querier) error {
		type msg struct {
			site int64
			text string
		}
		want := map[int64]msg{}
		st, err := q.Stmt(`SELECT id, site, text FROM message_search`)
		if err != nil {
			return err
		}
		if err := eachRow(st, nil, func() error { want[st.ColumnInt64(0)] = msg{st.ColumnInt64(1), st.ColumnText(2)}; return nil }); err != nil {
			return err
		}
		for _, id := range held {
			if _, ok := want[id]; !ok {
				t.Errorf("the index holds message %d, which is not a message to search", id)
			}
		}
		if len(held) != len(want) {
			t.Errorf("the index holds %d messages, want %d", len(held), len(want))
		}
		match, err := q.Stmt(`SELECT count(*) FROM search.messages_fts WHERE messages_fts MATCH ? AND rowid = ?`)
		if err != nil {
			return err
		}
		for id, m := range want {
			expr := `"` + siteTerm(m.site) + `"`
			for _, w := range strings.FieldsFunc(m.text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
				if !isStopWord(fold(w)) {
					expr += ` AND "` + w + `"`
				}
			}
			var found int64
			if _, err := queryRow(match, []any{expr, id}, &found); err != nil {
				return err
			}
			if found != 1 {
				t.Errorf("message %d (%q) does not match %s", id, m.text, expr)
			}
		}
		return nil
	}))
}

// searchStore opens a store with a site and an operator of it (closed with the test).
func searchStore(t *testing.T) (*Store, *Site, *Operator) {
	s := openTest(t, t.TempDir(), Options{})
	t.Cleanup(func() { s.Close() })
	site := addSite(t, s)
	op := addAnn(t, s, site)
	return s, site, op
}

// indexedWalruses leaves in a data directory 30 messages of a site's 5 conversations with
// "walrus" in each, indexed, the store closed.
func indexedWalruses(t *testing.T) (dir string, site *Site, op *Operator) {
	dir = t.TempDir()
	s := openTest(t, dir, Options{})
	site = addSite(t, s)
	op = addAnn(t, s, site)
	for i := range 30 {
		submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(fmt.Sprintf("%032d", i%5)), Author: schema.AuthorVisitor,
			Text: fmt.Sprintf("walrus number %d", i), ClientID: fmt.Sprint("w", i)})
	}
	requireIndexAgrees(t, s)
	testkit.NoErr(t, s.Close())
	return dir, site, op
}

// A search.db whose pages are damaged while the edge runs is built again by the indexer as
// soon as a pass finds it (not left to an SRE), and the readers, attached to the old file,
// search the new one.
func TestSearchIndexDamagedRebuilds(t *testing.T) {
	ctx := context.Background()
	dir, site, op := indexedWalruses(t)

	// Every page but the first (the schema) and the watermark's: the file opens, and FTS5
	// finds garbage where its records were.
	path := filepath.Join(dir, SearchFileName)
	c, err := OpenConn(path, sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	var keep, pages int64
	_, err = queryConn(c, `SELECT (SELECT rootpage FROM sqlite_schema WHERE name = 'search_index'), (SELECT page_count FROM pragma_page_count)`, nil, &keep, &pages)
	testkit.NoErr(t, err)
	testkit.NoErr(t, c.Close())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	testkit.NoErr(t, err)
	garbage := bytes.Repeat([]byte{0xa5}, 4096)
	for p := int64(2); p <= pages; p++ {
		if p != keep {
			_, err = f.WriteAt(garbage, (p-1)*4096)
			testkit.NoErr(t, err)
		}
	}
	testkit.NoErr(t, f.Close())

	s := openTest(t, dir, Options{})
	defer s.Close()
	fresh := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("new-visitor"), Author: schema.AuthorVisitor, Text: "a fresh walrus", ClientID: "n"})
	// The pass that finds the damage may come before this call (the start's) or answer it.
	if err := s.IndexNow(ctx); err != nil && !damaged(err) {
		t.Fatal(err)
	}
	testkit.NoErr(t, s.IndexNow(ctx))
	if n := s.SearchIndexStats().Rebuilds; n != 1 {
		t.Fatalf("%d rebuilds, want 1", n)
	}
	requireIndexAgrees(t, s)
	res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "walrus "})
	testkit.NoErr(t, err)
	if len(res.Hits) != 6 || res.Hits[0].MessageID != fresh.MessageID {
		t.Fatalf("%+v; want the 6 conversations, the fresh walrus first", res.Hits)
	}
}

// Damage a pass does not read (the old segments' pages: a pass writes new ones) is found by
// the search that runs into it; the indexer then checks search.db and builds it again.
func TestSearchIndexDamageFoundBySearch(t *testing.T) {
	ctx := context.Background()
	dir, site, op := indexedWalruses(t)

	// Every segment's pages (FTS5's rows above 10), not its structure record.
	c, err := OpenConn(filepath.Join(dir, SearchFileName), sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	testkit.NoErr(t, c.Exec(`UPDATE messages_fts_data SET block = unhex(replace(hex(zeroblob(length(block))), '0', 'A')) WHERE id > 10`))
	testkit.NoErr(t, c.Close())

	s := openTest(t, dir, Options{})
	defer s.Close()
	testkit.NoErr(t, s.IndexNow(ctx)) // nothing new: the pass reads no segment
	if _, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "walrus "}); !damaged(err) {
		t.Fatalf("the search: %v; want the damage found", err)
	}
	testkit.WaitFor(t, "the indexer to build search.db again", 5*time.Second, func() bool { return s.SearchIndexStats().Rebuilds == 1 })
	testkit.NoErr(t, s.IndexNow(ctx))
	requireIndexAgrees(t, s)
	res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: "walrus "})
	testkit.NoErr(t, err)
	if len(res.Hits) != 5 {
		t.Fatalf("%+v; want the 5 conversations", res.Hits)
	}
}

// The index follows the messages a moment later: a message no commit indexed is searchable
// within the writer's tick, and retention deleting messages on both sides of the index's
// watermark leaves index and messages in agreement.
func TestSearchIndexFollows(t *testing.T) {
	ctx := context.Background()
	s, site, op := searchStore(t)
	found := func(word string) int {
		res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: word + " "})
		testkit.NoErr(t, err)
		return len(res.Hits)
	}
	old := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("old-visitor"), Author: schema.AuthorVisitor, Text: "an indexed walrus", ClientID: "o"})
	testkit.NoErr(t, s.IndexNow(ctx))
	fresh := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("new-visitor"), Author: schema.AuthorVisitor, Text: "a fresh narwhal", ClientID: "n"})
	testkit.WaitFor(t, "the writer's tick to index the narwhal", 3*time.Second, func() bool { return found("narwhal") == 1 })

	// One conversation indexed, one not yet: both expire and go.
	late := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("late-visitor"), Author: schema.AuthorVisitor, Text: "a late dugong", ClientID: "l"})
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		if _, err := tx.SetRetention(site.Key, 1); err != nil {
			return err
		}
		return tx.exec(`UPDATE conversations SET updated_at = 0 WHERE id IN (?, ?, ?)`, old.ConversationID, fresh.ConversationID, late.ConversationID)
	}))
	p, err := s.PurgeExpired(ctx, time.Now(), 0, 100)
	testkit.NoErr(t, err)
	if p.Messages != 3 {
		t.Fatalf("purged %+v, want 3 messages", p)
	}
	testkit.NoErr(t, s.IndexNow(ctx))
	for _, w := range []string{"walrus", "narwhal", "dugong"} {
		if n := found(w); n != 0 {
			t.Errorf("%q: %d hits after its conversation was purged", w, n)
		}
	}
	requireIndexAgrees(t, s)
}

// The forget rule holds whatever the passes' sizes and timing: messages written and purged
// while the indexer runs in passes of three rows (some passes only forgetting, some reading
// rows retention deletes right after) leave the index holding exactly the messages.
// With passes of three rows the writer's feed overflows and most passes read the database;
// with passes of a thousand most take the feed, and every pass that forgets reads it.
func TestSearchIndexForgetsAcrossSmallPasses(t *testing.T) {
	for _, chunk := range []int{3, 1000} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			s := openTest(t, t.TempDir(), Options{searchChunk: chunk})
			defer s.Close()
			forgetAcrossPasses(t, s)
			if fed := s.idx.fedPasses.Load(); chunk > 100 && fed == 0 {
				t.Fatalf("no pass of %d took the feed", s.idx.passes.Load())
			}
		})
	}
}

func forgetAcrossPasses(t *testing.T, s *Store) {
	ctx := context.Background()
	site := addSite(t, s)
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { _, err := tx.SetRetention(site.Key, 1); return err }))
	rng := rand.New(rand.NewPCG(35, 11))
	purged := 0
	for round := range 25 {
		var convs []int64
		for i := range 8 {
			r := submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(fmt.Sprintf("visitor-%d", rng.IntN(12))), Author: schema.AuthorVisitor,
				Text: fmt.Sprintf("round%d walrus number%d", round, i), ClientID: fmt.Sprint(round, "-", i)})
			convs = append(convs, r.ConversationID)
			if rng.IntN(4) == 0 {
				s.idx.wake()
			}
		}
		// Expire a few of this round's conversations (and whatever earlier messages they hold).
		for _, c := range convs[:rng.IntN(4)] {
			testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { return tx.exec(`UPDATE conversations SET updated_at = 0 WHERE id = ?`, c) }))
		}
		p, err := s.PurgeExpired(ctx, time.Now(), 0, 100)
		testkit.NoErr(t, err)
		purged += p.Messages
	}
	if purged == 0 {
		t.Fatal("nothing was purged: the test did not test forgetting")
	}
	requireIndexAgrees(t, s)
	if st := s.SearchIndexStats(); st.Failed != 0 || st.Behind != 0 {
		t.Fatalf("indexer %+v: want no failed pass and nothing behind", st)
	}
}

// The newest message, purged before any pass took it from the writer's feed, is not indexed
// by a later pass that takes the feed: the pass that applied its forget dropped the feed.
func TestSearchIndexForgetsAMessageStillInTheFeed(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), Options{searchEvery: time.Hour}) // passes only when asked
	defer s.Close()
	site := addSite(t, s)
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { _, err := tx.SetRetention(site.Key, 1); return err }))
	visitor := func(name, text string) MessageResult {
		return submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte(name), Author: schema.AuthorVisitor, Text: text, ClientID: name})
	}
	visitor("kept", "a kept walrus")
	testkit.NoErr(t, s.IndexNow(ctx))
	gone := visitor("gone", "a purged narwhal") // in the feed, not yet indexed
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error {
		return tx.exec(`UPDATE conversations SET updated_at = 0 WHERE id = ?`, gone.ConversationID)
	}))
	if p, err := s.PurgeExpired(ctx, time.Now(), 0, 100); err != nil || p.Messages != 1 {
		t.Fatalf("purged %+v, %v; want the narwhal", p, err)
	}
	testkit.NoErr(t, s.IndexNow(ctx)) // applies the narwhal's forget: not indexed, nothing to do
	fed := s.idx.fedPasses.Load()
	visitor("later", "a later dugong")
	requireIndexAgrees(t, s)
	if s.idx.fedPasses.Load() != fed {
		t.Fatal("the pass after the forget took the feed")
	}
	visitor("last", "the last beluga")
	requireIndexAgrees(t, s)
	if s.idx.fedPasses.Load() == fed {
		t.Fatal("no pass took the feed once the index was through what it had dropped")
	}
}

// A pass's rows and forgets are spans of one text, each what the index holds of its
// message; the buffers serve the next pass, but not the peak of a catch-up over long messages.
func TestPassBufSpansAndBound(t *testing.T) {
	var b passBuf
	addRow(&b, 1, 7, []byte("the order"))
	b.addForget(3, 2, 8, []byte("A refund, please"))
	addRow(&b, 4, 7, []byte("Où est-il?"))
	text := func(from, to int) string { return string(b.text[from:to]) }
	for _, c := range []struct{ got, want string }{
		{text(b.rows[0].from, b.rows[0].to), "0site7  order"},
		{text(b.forgets[0].from, b.forgets[0].to), "0site8  refund, please"},
		{text(b.rows[1].from, b.rows[1].to), "0site7 Où est-il?"},
	} {
		if c.got != c.want {
			t.Errorf("span %q, want %q", c.got, c.want)
		}
	}
	if b.forgets[0].seq != 3 || b.forgets[0].message != 2 || b.rows[1].id != 4 {
		t.Fatalf("rows %+v, forgets %+v", b.rows, b.forgets)
	}
	b.reset()
	if len(b.rows)+len(b.forgets)+len(b.text) != 0 || cap(b.text) == 0 {
		t.Fatalf("after a small pass: %d rows, %d forgets, text %d of %d; want empty, its room kept", len(b.rows), len(b.forgets), len(b.text), cap(b.text))
	}
	long := []byte(strings.Repeat("word ", 800))
	for i := range 300 {
		addRow(&b, int64(i), 1, long)
	}
	b.reset()
	if cap(b.text) != 0 {
		t.Fatalf("after a catch-up of %d rows of %d bytes the pass keeps %d bytes of text; want none", 300, len(long), cap(b.text))
	}
}

// An idle edge's indexer opens no snapshot on its ticks: once a pass found nothing to read,
// ticks go by without a pass until the writer commits again, and then the next tick (not a
// kick: one message is far below indexBatch) indexes what it wrote.
func TestSearchIndexIdleTicksReadNothing(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), Options{searchEvery: 5 * time.Millisecond})
	defer s.Close()
	site := addSite(t, s)
	op := addAnn(t, s, site)
	found := func(word string) int {
		res, err := s.Search(ctx, op.ID, site.ID, SearchQuery{Text: word + " "})
		testkit.NoErr(t, err)
		return len(res.Hits)
	}
	submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("a-visitor"), Author: schema.AuthorVisitor, Text: "an indexed walrus", ClientID: "w"})
	testkit.NoErr(t, s.IndexNow(ctx))
	x := s.idx
	testkit.WaitFor(t, "a pass that finds nothing to read", 3*time.Second, func() bool { return x.idleAt.Load() == x.commits.Load()+1 })

	passes, ticks := x.passes.Load(), x.ticks.Load()
	testkit.WaitFor(t, "ten more ticks", 3*time.Second, func() bool { return x.ticks.Load() >= ticks+10 })
	if n := x.passes.Load() - passes; n != 0 {
		t.Fatalf("%d passes in ten ticks without a commit, want none", n)
	}

	submit(t, s, MessageRequest{SiteID: site.ID, TokenHash: []byte("a-visitor"), Author: schema.AuthorVisitor, Text: "a fresh narwhal", ClientID: "n"})
	testkit.WaitFor(t, "a tick to index the narwhal", 3*time.Second, func() bool { return found("narwhal") == 1 })
	if x.passes.Load() == passes {
		t.Fatal("the narwhal was found without a pass")
	}
	requireIndexAgrees(t, s)
}

// addAnn adds Ann, an operator and a member of site.
func addAnn(t *testing.T, s *Store, site *Site) *Operator {
	t.Helper()
	var op *Operator
	testkit.NoErr(t, s.Write(context.Background(), func(tx *Tx) (err error) {
		op, err = tx.AddOperator("ann@example.com", "Ann", "correct horse battery", []string{site.Key})
		return err
	}))
	return op
}
