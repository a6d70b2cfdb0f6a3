-- spookat schema v21: replies from Discord (issue 37). A conversation's Discord thread (a forum
-- post's thread, from the worker's result) routes a reply written in it back to the
-- conversation; a Discord reply to one of its posts in a plain channel is found by the post's
-- message id (partial indexes: nothing for the other targets' rows). The site's bot token lets
-- a worker hold the Discord gateway for it (a secret, like the Slack token).
ALTER TABLE conversations ADD COLUMN discord_thread TEXT NOT NULL DEFAULT '';
CREATE INDEX conversations_discord_thread ON conversations(discord_thread) WHERE discord_thread != '';
CREATE INDEX deliveries_discord ON deliveries(external_id) WHERE target = 'discord' AND external_id != '';
ALTER TABLE sites ADD COLUMN discord_bot_token TEXT NOT NULL DEFAULT '';
