package stairs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// SlackStatsPath is where the Slack mock reports what it received, relative to its base URL.
var SlackStatsPath = "/stats"

// slackCount asks the Slack mock (loadgen mock) how many visitor messages it has received:
// slack_lines of its /stats, which counts each message of a merged post. It also accepts a
// bare number or another count name, at the top level or under "slack".
func slackCount(ctx context.Context, c *http.Client, base string) (int64, error) {
	u := strings.TrimRight(base, "/") + SlackStatsPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return parseSlackCount(body)
}

func parseSlackCount(body []byte) (int64, error) {
	var n int64
	if err := json.Unmarshal(body, &n); err == nil {
		return n, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return 0, fmt.Errorf("slack mock stats: %w", err)
	}
	for _, k := range []string{"slack", "Slack"} {
		if inner, ok := obj[k]; ok {
			if v, err := parseSlackCount(inner); err == nil {
				return v, nil
			}
		}
	}
	// slack_lines: messages delivered, counting each line of a merged post (the mock's /stats).
	for _, k := range []string{"slack_lines", "slack_posts", "delivered", "posts", "messages", "count", "total"} {
		if raw, ok := obj[k]; ok {
			var v int64
			if err := json.Unmarshal(raw, &v); err == nil {
				return v, nil
			}
		}
	}
	return 0, fmt.Errorf("slack mock stats: no count in %.200s", body)
}
