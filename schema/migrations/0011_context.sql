-- spookat schema v11: the visitor's context (schema.VisitorContext as JSON: page, title,
-- referrer, language, time zone, browser). visitors.context is the latest page the widget
-- reported; conversations.context the page the conversation started on. Both '' until known.
-- Earlier conversations of a person are found by the email they left: a partial index, so
-- visitors without one (most) cost it nothing.
ALTER TABLE visitors ADD COLUMN context TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN context TEXT NOT NULL DEFAULT '';
CREATE INDEX visitors_email ON visitors (site_id, email COLLATE NOCASE) WHERE email != '';
