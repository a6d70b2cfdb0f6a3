-- Ids a power cut must not give out twice. With -sync normal a cut may take the last commits,
-- and ids handed out in them would be handed out again, to other messages and conversations,
-- while JetStream, Slack threads and webhook receivers still know them as the lost ones. The
-- writer hands out ids below these limits only, and raises a limit in a synced commit before
-- it reaches it; every start begins at the limit (edge/internal/store/ids.go).
CREATE TABLE id_limits (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    messages      INTEGER NOT NULL,
    conversations INTEGER NOT NULL
);
INSERT INTO id_limits (id, messages, conversations)
    VALUES (1, coalesce((SELECT max(id) FROM messages), 0) + 1, coalesce((SELECT max(id) FROM conversations), 0) + 1);
