-- spookat schema v17: full-text search over what people wrote (kind '' with text: visitors'
-- messages, operators' replies and internal notes; not status lines). messages_fts is an
-- external-content FTS5 index: it holds the index only, the text stays in messages and is
-- read back through message_search for highlighting. The site is an indexed column so that a
-- query matches one site's rows inside the index: a small site's search never walks a big
-- site's hits. The edge's writer adds each message's row in the transaction that stores the
-- message; this migration indexes the messages already there. A SQLite without FTS5 (the
-- module is registered on every connection the edge opens) cannot read this table.
CREATE VIEW message_search AS
    SELECT m.id AS id, c.site_id AS site, m.text AS text
    FROM messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE m.kind = '' AND m.text != '';
CREATE VIRTUAL TABLE messages_fts USING fts5(
    site, text,
    content = 'message_search', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
