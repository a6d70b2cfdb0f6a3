-- spookat schema v7: identity verification. A site's identity secret signs its users' ids
-- (user_hash = hex HMAC-SHA256(secret, user_id)); a visitor whose identify was verified
-- carries the site's user id, and that user has one visitor (one conversation) on every
-- device. Claims that were not verified are kept with verified = 0 and never matched.
ALTER TABLE sites ADD COLUMN identity_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE visitors ADD COLUMN user_id TEXT;
ALTER TABLE visitors ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE visitors ADD COLUMN verified INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX visitors_verified_user ON visitors (site_id, user_id) WHERE verified = 1;
