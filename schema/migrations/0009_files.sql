-- spookat schema v9: attachments. A file is written to disk by the upload handler, then
-- named here; the visitor's message that carries it points at it (messages.file_id), in the
-- same transaction as the message. A row no message points at is an upload not sent (yet).
CREATE TABLE files (
    id         INTEGER PRIMARY KEY,
    key        TEXT NOT NULL UNIQUE,    -- random, in URLs and on disk
    site_id    INTEGER NOT NULL REFERENCES sites(id),
    token_hash BLOB NOT NULL,           -- the uploading visitor's token, sha256
    name       TEXT NOT NULL,
    type       TEXT NOT NULL,           -- sniffed from the content, not the browser's claim
    size       INTEGER NOT NULL,
    sha256     BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX files_site ON files (site_id);
ALTER TABLE messages ADD COLUMN file_id INTEGER REFERENCES files(id);
CREATE INDEX messages_file ON messages (file_id) WHERE file_id IS NOT NULL;
