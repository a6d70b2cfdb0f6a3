-- spookat schema v20: the audit log: who did what to a site's settings, team and people, and
-- the logins and passwords of its operators. Written by the edge's single writer; never a
-- message's text, never a secret's value (settings changes name their fields only).
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    at          INTEGER NOT NULL,           -- Unix ms
    site_id     INTEGER NOT NULL DEFAULT 0, -- 0: no site's (a login, a password)
    operator_id INTEGER NOT NULL DEFAULT 0, -- 0: the command line, or nobody known (a failed login)
    actor       TEXT    NOT NULL,           -- the operator's email at the time, "cli", or the email tried
    address     TEXT    NOT NULL DEFAULT '', -- the client's address (trusted proxies applied)
    action      TEXT    NOT NULL,
    detail      TEXT    NOT NULL DEFAULT '' -- JSON: field names, ids, counts
);
CREATE INDEX audit_site ON audit (site_id, id);
CREATE INDEX audit_operator ON audit (operator_id, id);
