-- spookat schema v1. Applied once, in order, by the edge (the only writer).
-- Times are Unix milliseconds (INTEGER): cheap to compare, index and encode.

CREATE TABLE sites (
    id              INTEGER PRIMARY KEY,
    key             TEXT    NOT NULL UNIQUE,      -- public site key, put in the embed snippet
    name            TEXT    NOT NULL,
    origins         TEXT    NOT NULL DEFAULT '',  -- allowed Origins, one per line; '*' allows any (dev only)
    slack_token     TEXT    NOT NULL DEFAULT '',
    slack_channel   TEXT    NOT NULL DEFAULT '',
    slack_signing_secret TEXT NOT NULL DEFAULT '',
    discord_webhook TEXT    NOT NULL DEFAULT '',
    webhook_url     TEXT    NOT NULL DEFAULT '',
    webhook_secret  TEXT    NOT NULL DEFAULT '',
    notify_email    TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL
);

CREATE TABLE operators (
    id            INTEGER PRIMARY KEY,
    email         TEXT    NOT NULL UNIQUE COLLATE NOCASE,
    name          TEXT    NOT NULL DEFAULT '',
    password_hash TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
);

CREATE TABLE site_members (
    site_id     INTEGER NOT NULL REFERENCES sites(id),
    operator_id INTEGER NOT NULL REFERENCES operators(id),
    PRIMARY KEY (site_id, operator_id)
) WITHOUT ROWID;

CREATE TABLE visitors (
    id         INTEGER PRIMARY KEY,
    site_id    INTEGER NOT NULL REFERENCES sites(id),
    token_hash BLOB    NOT NULL UNIQUE,           -- SHA-256 of the visitor token; the token itself is never stored
    email      TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE conversations (
    id               INTEGER PRIMARY KEY,
    site_id          INTEGER NOT NULL REFERENCES sites(id),
    visitor_id       INTEGER NOT NULL REFERENCES visitors(id),
    status           TEXT    NOT NULL DEFAULT 'open',  -- open | closed
    first_message_id INTEGER NOT NULL DEFAULT 0,
    last_message_id  INTEGER NOT NULL DEFAULT 0,
    slack_thread     TEXT    NOT NULL DEFAULT '',      -- Slack thread ts, learnt from the worker's results
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
-- Only site_id: updated_at changes with every message, and keeping it in the index costs the
-- writer on every message (bench/comments.md); the inbox sorts one site's conversations when it
-- reads them.
CREATE INDEX conversations_site ON conversations(site_id);
CREATE UNIQUE INDEX conversations_visitor ON conversations(visitor_id);

CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    author          TEXT    NOT NULL,             -- visitor | operator | system
    name            TEXT    NOT NULL DEFAULT '',
    text            TEXT    NOT NULL,
    client_id       TEXT,                         -- visitor's idempotency key; NULL for others
    internal        INTEGER NOT NULL DEFAULT 0,   -- operator note, never shown to the visitor
    created_at      INTEGER NOT NULL
);
-- Idempotency is scoped to the conversation: the index has locality (one visitor's keys sit together)
-- instead of a global index on random ids, which costs far more per insert (bench/comments.md).
CREATE UNIQUE INDEX messages_client ON messages(conversation_id, client_id);

-- Delivery state per message and target, written from the worker's results.
CREATE TABLE deliveries (
    message_id  INTEGER NOT NULL,
    target      TEXT    NOT NULL,                 -- slack | discord | webhook | email
    status      TEXT    NOT NULL,                 -- delivered | retrying | dead
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT    NOT NULL DEFAULT '',
    external_id TEXT    NOT NULL DEFAULT '',      -- Slack ts / Discord message id
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (message_id, target)
) WITHOUT ROWID;

-- The job publisher's watermark: every job of a message with id <= published_through has been
-- stored by JetStream. On start the edge re-publishes the jobs of the messages above it; the
-- duplicate window swallows those that had made it (schema/PROTOCOL.md, "Outbox: what survives
-- a crash").
CREATE TABLE outbox (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    published_through INTEGER NOT NULL
);
INSERT INTO outbox (id, published_through) VALUES (1, 0);
