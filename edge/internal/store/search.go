package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"spookat/schema"
)

// Search limits. A query walks at most SearchWindow of its newest matching messages: the
// cost of a common word stays bounded however big the site, and the answer says where to go
// on from when there may be older matches.
const (
	SearchWindow    = 2000
	SearchMaxTerms  = 8
	SearchMaxChars  = 200
	SearchMinPrefix = 3 // a shorter last word is matched whole: "re" as a prefix is most of a site
	searchResults   = 20
	snippetTokens   = 14
)

// ErrBadQuery wraps what is wrong with a search query, in a sentence for the operator.
var ErrBadQuery = errors.New("bad search query")

type queryError struct{ msg string }

func (e *queryError) Error() string { return e.msg }
func (e *queryError) Unwrap() error { return ErrBadQuery }

// errPageFull ends the walk of a search's matches once a page is full.
var errPageFull = errors.New("page full")

// SearchQuery is what an operator searches for in one site.
type SearchQuery struct {
	Text   string            // words, "quoted phrases"; the last word is a prefix while it is being typed
	Status schema.ConvStatus // open, snoozed, closed or "" for all
	From   int64             // Unix ms, messages written at or after; 0: no bound
	To     int64             // Unix ms, messages written at or before; 0: no bound
	Before int64             // a message id: only older messages (SearchResult.Next of the page before); 0: from the newest
	// AssignedTo keeps conversations assigned to this operator; Unassigned keeps those
	// assigned to nobody; neither: any.
	AssignedTo int64
	Unassigned bool
}

// Segment is a piece of a snippet; Match marks the words the query found.
type Segment struct {
	Text  string `json:"text"`
	Match bool   `json:"match,omitempty"`
}

// Hit is a conversation that matched: its newest matching message, highlighted.
type Hit struct {
	Conversation ConversationSummary `json:"conversation"`
	MessageID    int64               `json:"message_id"`
	MessageAt    int64               `json:"message_at"`
	Snippet      []Segment           `json:"snippet"`
}

// SearchResult is the answer to a SearchQuery: up to 20 conversations, the most recently
// matching first. Next, when not 0, is the Before of the page that goes on from here (there
// may be older matches); a conversation can show up again there with an older message.
type SearchResult struct {
	Hits []Hit `json:"hits"`
	Next int64 `json:"next,omitempty"`
	// People are the conversations whose visitor's name, email or user id match every word
	// (the first page only, up to 5, newest conversation first); their MessageID is 0 and
	// their snippet is "name · email · user id".
	People []Hit `json:"people"`
}

// searchTerm is a word or a "phrase" of a query: its words as the index keeps them (folded),
// the last one a prefix when prefix is set.
type searchTerm struct {
	words    []string // folded
	rawWords []string // as typed, for the MATCH expression (FTS5 folds them itself)
	prefix   bool
}

// matches says whether w, folded, is the term's i-th word (a prefix of it, for the last
// word of a prefix term).
func (t searchTerm) matches(i int, w string) bool {
	return w == t.words[i] || t.prefix && i == len(t.words)-1 && strings.HasPrefix(w, t.words[i])
}

// parseQuery reads what an operator typed into its terms: words and "phrases", all of
// which must match (no operator, column name or syntax from the input reaches FTS5: each
// word is quoted). The last word is a prefix while it is being typed: unless the input ends
// in a space or a quote or the word is shorter than SearchMinPrefix. Words with no letter or
// digit are dropped.
func parseQuery(text string) ([]searchTerm, error) {
	if utf8.RuneCountInString(text) > SearchMaxChars {
		return nil, &queryError{"The search is too long: use at most 200 characters."}
	}
	var terms []searchTerm
	for rest := text; ; {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		var raw string
		open := false
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				raw, rest, open = rest[1:], "", true
			} else {
				raw, rest = rest[1:1+end], rest[2+end:]
			}
		} else {
			end := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '"' })
			if end < 0 {
				raw, rest, open = rest, "", true
			} else {
				raw, rest = rest[:end], rest[end:]
			}
		}
		var words, raws []string
		for _, t := range tokens(raw) {
			words, raws = append(words, fold(raw[t.from:t.to])), append(raws, raw[t.from:t.to])
		}
		if len(words) == 0 {
			continue
		}
		if len(terms) == SearchMaxTerms {
			return nil, &queryError{"The search has too many words: use at most 8."}
		}
		last := raws[len(raws)-1]
		terms = append(terms, searchTerm{words: words, rawWords: raws, prefix: open && utf8.RuneCountInString(last) >= SearchMinPrefix})
	}
	if len(terms) == 0 {
		return nil, &queryError{"Type a word to search for."}
	}
	return terms, nil
}

// matchExpr is the FTS5 expression of terms, with the site's term (siteTerm) before them.
// The index keeps which messages have a word, not where (detail=none): a phrase is asked for
// word by word, and textMatches checks the order on the text. A word being typed
// (the last, a prefix) is left to textMatches too: FTS5 answers a prefix by merging the
// lists of every word that starts with it before it returns the first match — "the" is
// most of the index, and a million messages took 90 ms — where whole words are read
// lazily, newest first. A stop word is not in the index (stopWords): textMatches checks it.
// Without a whole word the index holds, the walk reads the site's newest messages.
func matchExpr(siteID int64, terms []searchTerm) string {
	quoted := []string{`"` + siteTerm(siteID) + `"`}
	for _, t := range terms {
		for i, w := range t.rawWords {
			if !(t.prefix && i == len(t.rawWords)-1) && !isStopWord(t.words[i]) {
				quoted = append(quoted, `"`+w+`"`)
			}
		}
	}
	return strings.Join(quoted, " AND ")
}

// Search finds the conversations of a site whose messages match q, the most recent match
// first: what an operator looks for is nearly always a recent conversation, and walking the
// index newest first stops as soon as a page is full, where ranking by relevance would read
// every match of every word (and the site's whole list) before answering. The operator must
// be a member of the site (no hits otherwise).
func (s *Store) Search(ctx context.Context, operatorID, siteID int64, q SearchQuery) (*SearchResult, error) {
	terms, err := parseQuery(q.Text)
	if err != nil {
		return nil, err
	}
	res := &SearchResult{Hits: []Hit{}, People: []Hit{}}
	w := matchWalk{siteID: siteID, q: q, assignee: AnyAssignee, terms: terms, res: res}
	if q.Unassigned {
		w.assignee = Unassigned
	} else if q.AssignedTo > 0 {
		w.assignee = q.AssignedTo
	}
	err = s.Read(ctx, func(rq Querier) error {
		member, err := rq.Stmt(`SELECT 1 FROM site_members WHERE operator_id = ? AND site_id = ?`)
		if err != nil {
			return err
		}
		if ok, err := queryRow(member, []any{operatorID, siteID}); err != nil || !ok {
			return err
		}
		if w.lo, w.hi, err = messageIDRange(rq, q.From, q.To); err != nil {
			return err
		}
		if q.Before > 0 && q.Before <= w.hi {
			w.hi = q.Before - 1
		}
		if w.lo > w.hi {
			return nil
		}
		if err := w.walk(rq); err != nil {
			if damaged(err) { // search.db's, or the messages' pages it led to: the indexer checks its own
				s.idx.suspect()
			}
			return err
		}
		if q.Before == 0 {
			if res.People, err = searchPeople(rq, siteID, q.Status, w.assignee, terms); err != nil {
				return err
			}
		}
		conv, err := rq.Stmt(`SELECT ` + summaryColumns + ` FROM conversations c ` + summaryJoins + ` WHERE c.id = ?2`)
		if err != nil {
			return err
		}
		for _, hits := range [][]Hit{res.Hits, res.People} {
			for i := range hits {
				if _, err := queryRow(conv, []any{operatorID, hits[i].Conversation.ID}, hits[i].Conversation.dest()...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// matchWalk is one walk over the index's matches of a query, newest first, into res.Hits.
type matchWalk struct {
	siteID   int64
	q        SearchQuery
	assignee int64
	lo, hi   int64 // message ids
	terms    []searchTerm
	res      *SearchResult
}

func (w *matchWalk) walk(rq Querier) error {
	// The site is a term of the expression as well as a join condition: inside the index,
	// it keeps a small site's search from walking a big site's hits; in the join, it is what
	// decides. The index is walked alone, newest first, and each match looked up: the window
	// bounds what is walked whatever the filters keep, and the walk stops with the page.
	match := matchExpr(w.siteID, w.terms)
	walk, err := rq.Stmt(`SELECT rowid FROM search.messages_fts WHERE messages_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3
		ORDER BY rowid DESC LIMIT ?4`)
	if err != nil {
		return err
	}
	look, err := rq.Stmt(`SELECT m.conversation_id, m.created_at, m.text FROM messages m JOIN conversations c ON c.id = m.conversation_id
		WHERE m.id = ?1 AND c.site_id = ?2 AND (?3 = '' OR c.status = ?3) AND m.created_at BETWEEN ?4 AND ?5
		AND (?6 < 0 OR c.assignee_id = ?6)`)
	if err != nil {
		return err
	}
	to := w.q.To
	if to <= 0 {
		to = 1<<62 - 1
	}
	res := w.res
	seen := map[int64]bool{}
	walked, last := 0, int64(0)
	err = eachRow(walk, []any{match, w.lo, w.hi, SearchWindow}, func() error {
		id := walk.ColumnInt64(0)
		walked, last = walked+1, id
		h := Hit{MessageID: id}
		var text string
		found, err := queryRow(look, []any{id, w.siteID, w.q.Status, w.q.From, to, w.assignee}, &h.Conversation.ID, &h.MessageAt, &text)
		if err != nil || !found || seen[h.Conversation.ID] || !textMatches(text, w.terms) {
			return err
		}
		if len(res.Hits) == searchResults {
			res.Next = id + 1 // the next page starts with this one
			return errPageFull
		}
		seen[h.Conversation.ID] = true
		h.Snippet = highlight(text, w.terms, snippetTokens)
		res.Hits = append(res.Hits, h)
		return nil
	})
	walk.Reset()
	if err != nil && !errors.Is(err, errPageFull) {
		return err
	}
	if res.Next == 0 && walked == SearchWindow {
		res.Next = last
	}
	return nil
}

// People search bounds: a site's identified visitors are read newest first, and the walk
// stops at peopleResults or after peopleWindow of them.
const (
	peopleResults = 5
	peopleWindow  = 20_000
)

// searchPeople finds the conversations whose visitor's name, email or user id hold every
// word of the query (a word split at punctuation, so "ann@example.com" is three, any order
// across the three fields; the last one a prefix as in the messages). Few visitors say who
// they are, and only those are read, in Go where the folding is the index's.
func searchPeople(rq Querier, siteID int64, status schema.ConvStatus, assignee int64, terms []searchTerm) ([]Hit, error) {
	st, err := rq.Stmt(`SELECT c.id, v.name, v.email, coalesce(v.user_id, '') FROM conversations c JOIN visitors v ON v.id = c.visitor_id
		WHERE c.site_id = ?1 AND (v.name != '' OR v.email != '' OR v.user_id IS NOT NULL)
		AND (?2 = '' OR c.status = ?2) AND (?3 < 0 OR c.assignee_id = ?3)
		ORDER BY c.id DESC LIMIT ?4`)
	if err != nil {
		return nil, err
	}
	people := []Hit{}
	err = eachRow(st, []any{siteID, status, assignee, peopleWindow}, func() error {
		var parts []string
		for i := 1; i <= 3; i++ {
			if v := st.ColumnText(i); v != "" {
				parts = append(parts, v)
			}
		}
		who := strings.Join(parts, " · ")
		if !allWords(who, terms) {
			return nil
		}
		people = append(people, Hit{Conversation: ConversationSummary{ID: st.ColumnInt64(0)}, Snippet: highlight(who, terms, 3*snippetTokens)})
		if len(people) == peopleResults {
			return errPageFull
		}
		return nil
	})
	st.Reset()
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, err
	}
	return people, nil
}

// allWords says whether text has every word of the terms (the last of a prefix term as a
// prefix), in any order.
func allWords(text string, terms []searchTerm) bool {
	var words []string
	for _, sp := range tokens(text) {
		words = append(words, fold(text[sp.from:sp.to]))
	}
	for _, t := range terms {
		for i := range t.words {
			if !slices.ContainsFunc(words, func(x string) bool { return t.matches(i, x) }) {
				return false
			}
		}
	}
	return true
}

// messageIDRange turns a range of times into the range of message ids written in it: ids
// grow with time, so a binary search over point lookups finds the bounds, and FTS5 then
// seeks to them instead of walking newer hits.
func messageIDRange(q Querier, from, to int64) (lo, hi int64, err error) {
	st, err := q.Stmt(`SELECT coalesce(max(id), 0) FROM messages`)
	if err != nil {
		return 0, 0, err
	}
	if _, err := queryRow(st, nil, &hi); err != nil {
		return 0, 0, err
	}
	lo = 1
	if from > 0 {
		if lo, err = firstIDAt(q, from, hi); err != nil {
			return 0, 0, err
		}
	}
	if to > 0 {
		first, err := firstIDAt(q, to+1, hi)
		if err != nil {
			return 0, 0, err
		}
		hi = first - 1
	}
	return lo, hi, nil
}

// firstIDAt finds the smallest id x such that the first message at or after x was written at
// or after t (max+1 when none was).
func firstIDAt(q Querier, t, max int64) (int64, error) {
	st, err := q.Stmt(`SELECT created_at FROM messages WHERE id >= ? ORDER BY id LIMIT 1`)
	if err != nil {
		return 0, err
	}
	lo, hi := int64(0), max+1 // the first message at or after lo is older than t; at hi, not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		var at int64
		found, err := queryRow(st, []any{mid}, &at)
		if err != nil {
			return 0, err
		}
		if found && at < t {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// textMatches says what the index could not: that text has the words of each term of more
// than one word (a "phrase", or a word like "e-mail") in a row, a word that starts with the
// one being typed, and a stop word.
func textMatches(text string, terms []searchTerm) bool {
	var words []string
	for _, t := range terms {
		if len(t.words) < 2 && !t.prefix && !isStopWord(t.words[0]) {
			continue
		}
		if words == nil {
			for _, sp := range tokens(text) {
				words = append(words, fold(text[sp.from:sp.to]))
			}
		}
		if !hasRun(words, t) {
			return false
		}
	}
	return true
}

func hasRun(words []string, t searchTerm) bool {
	n := len(t.words)
next:
	for i := 0; i+n <= len(words); i++ {
		for j := range t.words {
			if !t.matches(j, words[i+j]) {
				continue next
			}
		}
		return true
	}
	return false
}

// span is a word's bytes in a text.
type span struct{ from, to int }

// tokens splits s into words as the index's tokenizer (unicode61) does: runs of letters,
// digits and private-use characters; everything else separates them.
func tokens(s string) []span {
	var out []span
	start := -1
	for i, r := range s {
		word := unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			out = append(out, span{start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, span{start, len(s)})
	}
	return out
}

// fold is a word as the index keeps it (unicode61, remove_diacritics 2): lower case, without
// its marks (é is e, ß stays). An ASCII word has no marks to take off: a search folds every
// word of each row it walks, and decomposing those was a fifth of a big site's phrase search.
func fold(w string) string {
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			return foldMarks(w)
		}
	}
	return strings.ToLower(w)
}

// foldMarks is fold for a word that is not all ASCII.
func foldMarks(w string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.ToLower(w)) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// highlight cuts a snippet of about n words of text around its first word that a term
// matches, and marks every matching word.
func highlight(text string, terms []searchTerm, n int) []Segment {
	toks := tokens(text)
	matches := func(w string) bool {
		w = fold(w)
		for _, t := range terms {
			for i := range t.words {
				if t.matches(i, w) {
					return true
				}
			}
		}
		return false
	}
	hit := make([]bool, len(toks))
	first := -1
	for i, t := range toks {
		if hit[i] = matches(text[t.from:t.to]); hit[i] && first < 0 {
			first = i
		}
	}
	lo, hi := 0, len(toks)
	if len(toks) > n {
		lo = max(0, first-n/3)
		hi = min(len(toks), lo+n)
		lo = max(0, hi-n)
	}
	var segs []Segment
	plain := func(s string) {
		if s == "" {
			return
		}
		if k := len(segs) - 1; k >= 0 && !segs[k].Match {
			segs[k].Text += s
			return
		}
		segs = append(segs, Segment{Text: s})
	}
	pos := 0
	if lo > 0 {
		plain("…")
		pos = toks[lo].from
	}
	end := len(text)
	if hi < len(toks) {
		end = toks[hi-1].to
	}
	for i := lo; i < hi; i++ {
		t := toks[i]
		if !hit[i] {
			continue
		}
		plain(text[pos:t.from])
		segs = append(segs, Segment{Text: text[t.from:t.to], Match: true})
		pos = t.to
	}
	plain(text[pos:end])
	if hi < len(toks) {
		plain("…")
	}
	return segs
}
