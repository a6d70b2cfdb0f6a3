-- spookat schema v19: the team in the inbox. A member of a site is its owner (settings,
-- channels, secrets, members) or an agent (answers). Every membership made before this
-- version could change everything, so it stays an owner; the CLI's `site member add` makes
-- owners unless told -role agent.
ALTER TABLE site_members ADD COLUMN role TEXT NOT NULL DEFAULT 'owner' CHECK (role IN ('owner', 'agent'));

-- An owner's invitation to join a site: a single-use link sent by email (the worker's email
-- lane). Only the token's SHA-256 is kept; the link expires at expires_at and is spent once
-- used_at is set. status/last_error say how its email went.
CREATE TABLE invites (
    id         INTEGER PRIMARY KEY,
    site_id    INTEGER NOT NULL REFERENCES sites(id),
    email      TEXT    NOT NULL COLLATE NOCASE,
    role       TEXT    NOT NULL CHECK (role IN ('owner', 'agent')),
    token_hash BLOB    NOT NULL UNIQUE,
    invited_by INTEGER NOT NULL DEFAULT 0, -- operators.id
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER NOT NULL DEFAULT 0,
    status     TEXT    NOT NULL DEFAULT 'queued', -- queued | delivered | retrying | dead
    last_error TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX invites_site ON invites (site_id);
