-- How long a site keeps its conversations: a conversation whose last message is older than
-- this many days is deleted, with its messages, attachments, delivery records, read markers
-- and its visitor, by the edge's maintenance (edge/internal/store/retention.go). 0: forever.
ALTER TABLE sites ADD COLUMN retention_days INTEGER NOT NULL DEFAULT 0;
