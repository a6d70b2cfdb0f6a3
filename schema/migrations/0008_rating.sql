-- spookat schema v8: the visitor's rating of a closed conversation (good or bad, with an
-- optional comment), once per conversation.
ALTER TABLE conversations ADD COLUMN rating TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN rating_comment TEXT NOT NULL DEFAULT '';
