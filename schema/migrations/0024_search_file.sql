-- spookat schema v24: the search index moves out of this file into search.db beside it,
-- written by a connection and a goroutine of its own (edge/internal/store/searchindex.go).
-- FTS5 merges an index's segments inside the transaction that wrote the last one, and a merge
-- step that reaches a common word writes that word's whole list of messages: in this file
-- that held the commit every visitor's ack waits for, for up to 150 ms once the index had
-- grown (bench/path.md, tenth session). search.db is derived: the edge builds it from the
-- messages when it is missing or older than this file, and backups leave it out.
DROP TABLE messages_fts;
DROP TABLE search_index;
-- What the index must forget: the indexable messages that retention and erasures deleted
-- with the values the index holds for them (it keeps no text: FTS5 forgets a row of a
-- contentless index when given them again). The edge's indexer applies them in search.db and
-- the writer deletes them here once applied; seq never goes back (AUTOINCREMENT), so the
-- index's watermark of what it applied stays true when the table is emptied.
CREATE TABLE search_forget (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    message INTEGER NOT NULL,
    site    INTEGER NOT NULL,
    text    TEXT    NOT NULL
);
-- Which database search.db indexes: a new token each time this migration runs, so an index
-- built for a database that was since replaced by an older copy (a rollback to the copy
-- taken before a migration, then this migration again) is not taken for this one's.
CREATE TABLE search_file (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    token TEXT    NOT NULL
);
INSERT INTO search_file (id, token) VALUES (1, lower(hex(randomblob(16))));
