-- spookat schema v2: the operator inbox (sessions, API tokens, read markers) and replies from Slack.

-- Browser sessions of operators. The cookie holds a random token; only its SHA-256 is stored.
-- csrf is the session's CSRF token, sent back by the inbox in X-CSRF-Token on every
-- state-changing request.
CREATE TABLE sessions (
    token_hash  BLOB    PRIMARY KEY,
    operator_id INTEGER NOT NULL REFERENCES operators(id),
    csrf        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_operator ON sessions(operator_id);

-- Per-operator API tokens for /v1/api/ (Authorization: Bearer spk_…); only the SHA-256 is stored.
CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    operator_id  INTEGER NOT NULL REFERENCES operators(id),
    token_hash   BLOB    NOT NULL UNIQUE,
    name         TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL
);
CREATE INDEX api_tokens_operator ON api_tokens(operator_id);

-- What each operator has read of each conversation (the inbox's unread marks).
CREATE TABLE conversation_reads (
    conversation_id INTEGER NOT NULL,
    operator_id     INTEGER NOT NULL,
    last_read_id    INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, operator_id)
) WITHOUT ROWID;

-- Replies from Slack find their conversation by thread ts. Partial: most rows have no thread,
-- and the column is written once per conversation, never by the per-message updates.
CREATE INDEX conversations_slack_thread ON conversations(slack_thread) WHERE slack_thread != '';
