package store

import "context"

// SlackThread is a conversation's Slack thread as the edge recorded it from the workers'
// results.
type SlackThread struct {
	SiteID, ConversationID int64
	TS                     string
}

// SlackThreads returns up to limit recorded Slack threads of conversations with an id above
// after, ascending.
func (s *Store) SlackThreads(ctx context.Context, after int64, limit int) ([]SlackThread, error) {
	return readList(ctx, s, `SELECT site_id, id, slack_thread FROM conversations WHERE id > ? AND slack_thread != '' ORDER BY id LIMIT ?`,
		[]any{after, limit}, func(t *SlackThread) []any { return []any{&t.SiteID, &t.ConversationID, &t.TS} })
}
