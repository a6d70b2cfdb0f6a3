-- spookat schema v5: the visitor's read marker. The highest message id the visitor's chat
-- window has shown them (a seen frame): operator messages after it are unread in the widget,
-- and operators see "Seen" up to it. The operators' own markers are in conversation_reads.
ALTER TABLE conversations ADD COLUMN visitor_read_id INTEGER NOT NULL DEFAULT 0;
