package stairs

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Frame parsing on the hot path: the generator reads tens of thousands of small server frames
// a second, so it picks the few fields it needs out of the JSON by hand instead of decoding
// into structs. Only string and integer values of top-level keys are read; the server's
// frames (schema.Ack, schema.Error, schema.Hello) are flat objects.

// jsonField returns the raw value bytes of key in a flat JSON object: for a string the bytes
// between the quotes (escapes left as they are), for a number or literal the token. ok is
// false when the key is absent.
func jsonField(obj []byte, key string) (val []byte, isString, ok bool) {
	i := 0
	for {
		j := bytes.Index(obj[i:], []byte(key))
		if j < 0 {
			return nil, false, false
		}
		start := i + j
		end := start + len(key)
		i = end
		if start == 0 || obj[start-1] != '"' || end >= len(obj) || obj[end] != '"' {
			continue
		}
		k := skipSpace(obj, end+1)
		if k >= len(obj) || obj[k] != ':' {
			continue // the text was a string value, not a key
		}
		k = skipSpace(obj, k+1)
		if k >= len(obj) {
			return nil, false, false
		}
		if obj[k] == '"' {
			k++
			e := k
			for e < len(obj) && obj[e] != '"' {
				if obj[e] == '\\' {
					e++
				}
				e++
			}
			if e > len(obj) {
				e = len(obj)
			}
			return obj[k:e], true, true
		}
		e := k
		for e < len(obj) && obj[e] != ',' && obj[e] != '}' && obj[e] != ' ' && obj[e] != '\n' && obj[e] != '\t' && obj[e] != '\r' {
			e++
		}
		return obj[k:e], false, true
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// frameKind classifies a server frame by its "type".
type frameKind uint8

const (
	kindOther frameKind = iota
	kindAck
	kindError
	kindHello
	kindMessage
)

func frameType(obj []byte) frameKind {
	v, _, ok := jsonField(obj, "type")
	if !ok {
		return kindOther
	}
	switch string(v) { // no allocation: the compiler compares in place
	case "ack":
		return kindAck
	case "error":
		return kindError
	case "hello":
		return kindHello
	case "message":
		return kindMessage
	}
	return kindOther
}

// clientSeq extracts the message sequence from a client id this run made
// ("<run>-<socket>-<seq base36>"), checking the run and socket parts.
func clientSeq(id []byte, prefix []byte) (uint64, bool) {
	if !bytes.HasPrefix(id, prefix) {
		return 0, false
	}
	rest := id[len(prefix):]
	if len(rest) == 0 || len(rest) > 13 {
		return 0, false
	}
	var n uint64
	for _, c := range rest {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'z':
			d = c - 'a' + 10
		default:
			return 0, false
		}
		n = n*36 + uint64(d)
	}
	return n, true
}

// appendMessageFrame appends {"type":"message","client_id":"<prefix><seq>","text":"<text>"}.
// text must need no JSON escaping (loadgen's own filler does not).
func appendMessageFrame(dst, prefix []byte, seq uint64, text []byte) []byte {
	dst = append(dst, `{"type":"message","client_id":"`...)
	dst = append(dst, prefix...)
	dst = strconv.AppendUint(dst, seq, 36)
	dst = append(dst, `","text":"`...)
	dst = append(dst, text...)
	dst = append(dst, `"}`...)
	return dst
}

// pageFrame is the page frame a widget sends after each hello: the origin's front page.
func pageFrame(origin string) []byte {
	b, _ := json.Marshal(map[string]string{"type": "page", "url": origin + "/", "title": "loadgen", "language": "en"})
	return b
}
