-- spookat schema v3: where a message was written is a column, not a client-id prefix.
-- widget: a visitor's chat window; inbox: an operator in the inbox or the API; slack: an
-- operator's reply in a Slack thread. Client ids are unique per source, so no visitor can
-- pick one that shadows a Slack reply.
ALTER TABLE messages ADD COLUMN source TEXT NOT NULL DEFAULT 'widget';
UPDATE messages SET source = 'slack' WHERE author = 'operator' AND client_id LIKE 'slack:%';
UPDATE messages SET source = 'inbox' WHERE author <> 'visitor' AND source = 'widget';
DROP INDEX messages_client;
CREATE UNIQUE INDEX messages_client ON messages(conversation_id, source, client_id);
