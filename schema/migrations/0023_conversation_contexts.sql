-- spookat schema v23: the page a conversation started on (its context, JSON) moves out of
-- conversations into a table of its own. Every message a visitor or an operator writes
-- updates its conversation's row (last_message_id, updated_at), so the writer writes that
-- row's page again in each commit; with a user agent, a title and a URL in it a row was
-- several hundred bytes, a page held a handful of conversations, and a commit's messages
-- dirtied about a page each. Without it a page holds ~60 rows (bench/path.md, ninth
-- session). A conversation has a row here only once its first page is known.
CREATE TABLE conversation_contexts (
    conversation_id INTEGER PRIMARY KEY,
    context         TEXT    NOT NULL
);
INSERT INTO conversation_contexts (conversation_id, context)
    SELECT id, context FROM conversations WHERE context != '';
ALTER TABLE conversations DROP COLUMN context;
