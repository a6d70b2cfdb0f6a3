-- spookat schema v17: full-text search over what people wrote (kind '' with text: visitors'
-- messages, operators' replies and internal notes; not status lines). messages_fts is an
-- external-content FTS5 index: it holds the index only, the text stays in messages and is
-- read back through message_search for highlighting. The site is an indexed column so that a
-- query matches one site's rows inside the index: a small site's search never walks a big
-- site's hits. The index keeps which column a word is in but not where (detail=column: a
-- smaller and cheaper to write; the edge checks a phrase's word order on the text),
-- and no per-row sizes (columnsize=0: they serve bm25 ranking only; search orders by
-- recency). The edge's writer adds new messages in batches, at most about a second behind
-- (search_index below), and automerge 12 merges the batches' segments less often than the
-- default 4 (bench/issue34.md); this migration indexes the messages already there. A SQLite
-- without FTS5 (the module is registered on every connection the edge opens) cannot read
-- this table.
CREATE VIEW message_search AS
    SELECT m.id AS id, c.site_id AS site, m.text AS text
    FROM messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE m.kind = '' AND m.text != '';
CREATE VIRTUAL TABLE messages_fts USING fts5(
    site, text,
    content = 'message_search', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2',
    columnsize = 0, detail = column
);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
-- The newest message id the index holds: the edge's writer indexes new messages in batches
-- (at most about a second behind) and moves this in the same transaction.
CREATE TABLE search_index (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    through INTEGER NOT NULL
);
INSERT INTO search_index (id, through) SELECT 1, coalesce(max(id), 0) FROM messages;
INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 12);
