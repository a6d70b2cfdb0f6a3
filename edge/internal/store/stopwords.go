package store

// English words too common to be worth a list in the search index. Each is in most chats'
// messages, so its list would hold most of a site's messages, and the index spent more on
// writing and merging these lists than on all the others (bench/path.md, thirteenth
// session). A search still finds them: the index is asked for a query's other words, and
// the text of each message it walks is checked for all of them (textMatches); a query made
// only of these words walks the site's newest messages (SearchWindow), as a word still
// being typed does.
//
// Changing this list changes what the index holds for a message, and a message is forgotten
// by giving its indexed text again: bump searchVersion with it, so that search.db is rebuilt.
var stopWords = map[string]struct{}{}

func init() {
	for _, w := range []string{
		// Lucene's English stop set.
		"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
		"is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then",
		"there", "these", "they", "this", "to", "was", "will", "with",
		// The pronouns and helpers of a chat.
		"i", "me", "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her",
		"its", "them", "am", "been", "were", "have", "has", "had", "do", "does", "did", "can",
		"could", "would", "should", "so", "just", "from", "about", "what", "how", "when",
	} {
		stopWords[w] = struct{}{}
	}
}

// stopWordMax is the longest stop word's length.
const stopWordMax = 6

// isStopWord reports whether w, folded (fold), is left out of the index.
func isStopWord(w string) bool {
	if len(w) > stopWordMax {
		return false
	}
	_, ok := stopWords[w]
	return ok
}

// appendIndexable appends text without its stop words. A stop word is left out only where
// the tokenizer (unicode61) would make it a token of its own: a run of ASCII letters with an
// ASCII separator, or nothing, on each side ("I'm" loses its "I", "a1" and "à" stay).
// Everything else, separators included, is copied as it is.
func appendIndexable[T string | []byte](dst []byte, text T) []byte {
	copied := 0
	for i := 0; i < len(text); {
		if !asciiLetter(text[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(text) && asciiLetter(text[j]) {
			j++
		}
		if j-i <= stopWordMax && (i == 0 || asciiSeparator(text[i-1])) && (j == len(text) || asciiSeparator(text[j])) {
			var low [stopWordMax]byte
			for k := i; k < j; k++ {
				low[k-i] = text[k] | 0x20 // an ASCII letter's lower case
			}
			if _, ok := stopWords[string(low[:j-i])]; ok {
				dst = append(dst, text[copied:i]...)
				copied = j
			}
		}
		i = j
	}
	return append(dst, text[copied:]...)
}

func asciiLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// asciiSeparator reports whether c separates tokens for unicode61: ASCII, and neither a
// letter nor a digit.
func asciiSeparator(c byte) bool { return c < 0x80 && !asciiLetter(c) && (c < '0' || c > '9') }
