package slack

import (
	"encoding/json"

	"spookat/schema/fastjson"
)

// answer is what the worker needs from chat.postMessage's answer.
type answer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	TS    string `json:"ts"`
}

// decodeAnswer reads "ok", "error" and "ts" from the top level of Slack's answer. Slack sends
// the whole posted message back; encoding/json validated and walked all of it, a tenth of the
// worker's CPU. The fast reader skips the rest; anything it does not expect goes to
// encoding/json.
func decodeAnswer(b []byte) (answer, error) {
	var a answer
	if fastjson.Object(b, func(key []byte, i int) (int, bool) {
		var ok bool
		switch string(key) {
		case "ok":
			a.OK, i, ok = fastjson.Bool(b, i)
		case "ts":
			a.TS, i, ok = fastjson.String(b, i)
		case "error":
			a.Error, i, ok = fastjson.String(b, i)
		default:
			if !fastjson.Unknown(key, "ok", "ts", "error") {
				return i, false
			}
			i, ok = fastjson.SkipValue(b, i)
		}
		return i, ok
	}) {
		return a, nil
	}
	a = answer{}
	err := json.Unmarshal(b, &a)
	return a, err
}
