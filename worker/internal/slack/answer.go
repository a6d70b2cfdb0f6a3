package slack

import "spookat/schema/fastjson"

// answer is what the worker needs from chat.postMessage's answer.
type answer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	TS    string `json:"ts"`
}

// decodeAnswer reads "ok", "error" and "ts" from the top level of Slack's answer. Slack sends
// the whole posted message back, and encoding/json validated and walked all of it (its cost:
// bench/comments.md). The fast reader skips the rest; anything it does not expect goes to
// encoding/json.
func decodeAnswer(b []byte) (answer, error) {
	var a answer
	err := fastjson.Decode(b, &a, answerField)
	return a, err
}

func answerField(a *answer, b, key []byte, i int) (next int, ok bool) {
	switch string(key) {
	case "ok":
		a.OK, next, ok = fastjson.Bool(b, i)
	case "ts":
		a.TS, next, ok = fastjson.String(b, i)
	case "error":
		a.Error, next, ok = fastjson.String(b, i)
	default:
		if !fastjson.Unknown(key, "ok", "ts", "error") {
			return i, false
		}
		next, ok = fastjson.SkipValue(b, i)
	}
	return next, ok
}
