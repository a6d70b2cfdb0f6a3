-- spookat schema v18: canned replies, a site's shared answers. An operator inserts one in the
-- inbox's composer with "/" and a few letters of its title; the inbox fills in the
-- placeholders of its text ({{visitor.name}}, {{operator.name}}…) before the operator sends,
-- so what is stored here is the template, never a message.
CREATE TABLE canned_replies (
    id         INTEGER PRIMARY KEY,
    site_id    INTEGER NOT NULL REFERENCES sites(id),
    title      TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    updated_by INTEGER NOT NULL DEFAULT 0, -- operators.id of the last to write it (0: the CLI)
    updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX canned_replies_title ON canned_replies (site_id, title COLLATE NOCASE);
