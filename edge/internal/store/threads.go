package store

import (
	"context"
	"fmt"

	"spookat/schema"
)

// Thread is a conversation's thread at a chat target (a Slack parent post's ts, a Discord
// forum thread's id) as the edge recorded it from the workers' results.
type Thread struct {
	SiteID, ConversationID int64
	ID                     string
}

// Threads returns up to limit recorded threads at target (schema.TargetSlack or
// schema.TargetDiscord) of conversations with an id above after, ascending.
func (s *Store) Threads(ctx context.Context, target string, after int64, limit int) ([]Thread, error) {
	column := map[string]string{schema.TargetSlack: "slack_thread", schema.TargetDiscord: "discord_thread"}[target]
	if column == "" {
		return nil, fmt.Errorf("no threads at %q", target)
	}
	return readList(ctx, s, `SELECT site_id, id, `+column+` FROM conversations WHERE id > ? AND `+column+` != '' ORDER BY id LIMIT ?`,
		[]any{after, limit}, func(t *Thread) []any { return []any{&t.SiteID, &t.ConversationID, &t.ID} })
}
