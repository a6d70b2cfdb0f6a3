-- spookat schema v12: a visitor's message that reopened a closed conversation (1), so that a
-- replay after a crash still tells Slack (the ✅ comes off the thread's parent) and the inbox
-- shows the line. Status changes by operators are messages of kind 'closed' and 'reopened'
-- (v10's column).
ALTER TABLE messages ADD COLUMN reopened INTEGER NOT NULL DEFAULT 0;
