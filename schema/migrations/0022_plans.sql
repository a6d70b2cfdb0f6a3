-- spookat schema v22: plans and Paddle billing (issue 38), used only by an edge started with
-- -plans. A site's plan as its Paddle subscription last said (no row: the default plan);
-- each subscription's last applied event, so that an older event arriving late changes
-- nothing; the event ids seen, so that a redelivery changes nothing; the month a site's
-- operators were told its conversations ran out (once a month).
CREATE TABLE site_plans (
    site_id         INTEGER PRIMARY KEY,
    plan            TEXT    NOT NULL,
    status          TEXT    NOT NULL,            -- active | trialing | past_due | paused | canceled
    subscription_id TEXT    NOT NULL,
    past_due_since  INTEGER NOT NULL DEFAULT 0,  -- Unix ms; 0 unless past_due
    updated_at      INTEGER NOT NULL
);
CREATE TABLE paddle_subscriptions (
    id          TEXT    PRIMARY KEY,
    occurred_at INTEGER NOT NULL,                -- Unix ms of the last event applied
    status      TEXT    NOT NULL,
    plan        TEXT    NOT NULL,
    sites       TEXT    NOT NULL                 -- the site keys it named, one a line
);
CREATE TABLE paddle_events (
    event_id    TEXT    PRIMARY KEY,
    received_at INTEGER NOT NULL
);
CREATE INDEX paddle_events_received ON paddle_events (received_at);
CREATE TABLE plan_notices (
    site_id INTEGER NOT NULL,
    month   TEXT    NOT NULL,                    -- 2026-12 (UTC)
    PRIMARY KEY (site_id, month)
) WITHOUT ROWID;
