// Package fastjson encodes and reads the few JSON shapes on spookat's hot paths (frames, jobs,
// results, Slack's answers) without reflection. Readers are strict where it matters: on
// anything they do not expect they report !ok, and the caller falls back to encoding/json,
// which has the last word. Fuzz tests hold them to encoding/json's reading.
package fastjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Decode reads the object in b into v, calling field for each member with its key and the
// index of its value; field returns the index after the value, or !ok to decline. When
// field declines anything, or b is not one object, encoding/json reads b instead. field is
// a plain function, not a closure, and v is written in place: no allocation of its own.
func Decode[T any](b []byte, v *T, field func(v *T, b, key []byte, i int) (next int, ok bool)) error {
	var zero T
	*v = zero
	if object(b, v, field) {
		return nil
	}
	*v = zero
	return json.Unmarshal(b, v)
}

func object[T any](b []byte, v *T, field func(v *T, b, key []byte, i int) (next int, ok bool)) bool {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return SkipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := Plain(b, i)
		if !ok {
			return false
		}
		i = SkipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		if i, ok = field(v, b, key, SkipSpace(b, i+1)); !ok {
			return false
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// Plain returns the bytes of the string at b[i] (they alias b) when it has no escapes,
// control characters or invalid UTF-8, !ok otherwise. Keys are read with it.
func Plain(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, utf8.Valid(b[i+1 : j])
		case c == '\\' || c < 0x20:
			return nil, i, false
		}
	}
	return nil, i, false
}

// String reads the string at b[i], escapes decoded. Invalid UTF-8 and lone surrogates are
// left to encoding/json (!ok).
func String(b []byte, i int) (s string, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	j := i + 1
	for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 {
		j++
	}
	if j < len(b) && b[j] == '"' {
		if !utf8.Valid(b[i+1 : j]) {
			return "", i, false
		}
		return string(b[i+1 : j]), j + 1, true
	}
	out := make([]byte, 0, j-i+16)
	out = append(out, b[i+1:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", i, false
			}
			return string(out), j + 1, true
		case c < 0x20:
			return "", i, false
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			return "", i, false
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, ok := hex4(b, j+2)
			if !ok {
				return "", i, false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if j+1 < len(b) && b[j] == '\\' && b[j+1] == 'u' {
					r2, ok = hex4(b, j+2)
				}
				if !ok || utf16.DecodeRune(r, r2) == utf8.RuneError {
					return "", i, false // a lone surrogate: encoding/json's U+FFFD rules apply
				}
				r = utf16.DecodeRune(r, r2)
				j += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", i, false
		}
		j += 2
	}
	return "", i, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Int reads an integer at b[i].
func Int(b []byte, i int) (n int64, next int, ok bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
	if err != nil || (j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E')) {
		return 0, i, false
	}
	if j-i > 1 && (b[i] == '0' || b[i] == '-' && b[i+1] == '0') {
		return 0, i, false // leading zeros are not JSON
	}
	return n, j, true
}

// Bool reads true or false at b[i].
func Bool(b []byte, i int) (v bool, next int, ok bool) {
	switch {
	case bytes.HasPrefix(b[i:], []byte("true")):
		return true, i + 4, true
	case bytes.HasPrefix(b[i:], []byte("false")):
		return false, i + 5, true
	}
	return false, i, false
}

// Null reports whether b[i] starts a null (encoding/json leaves the field as it was).
func Null(b []byte, i int) (next int, ok bool) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return i + 4, true
	}
	return i, false
}

// SkipValue returns the index after the value at b[i]: objects and arrays by depth (strings
// in them skipped with their escapes), scalars up to the next delimiter. It checks structure
// only loosely; use it for members whose content does not matter.
func SkipValue(b []byte, i int) (int, bool) {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return i, false
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(b) && (b[i] == ',' || b[i] == '}') {
			return i, true
		}
	}
	return i, depth == 0
}

// Unknown reports whether key is none of names the way encoding/json matches them (ASCII
// case folded); a key with non-ASCII bytes is never called unknown, so its member goes to
// encoding/json, which folds Unicode too.
func Unknown(key []byte, names ...string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return false
		}
	}
	return true
}
