-- spookat schema v6: how a site's chat window looks and who it says answers (title, accent,
-- position, greeting, office hours, away message...), as the JSON of schema.WidgetSettings.
ALTER TABLE sites ADD COLUMN widget TEXT NOT NULL DEFAULT '{}';
