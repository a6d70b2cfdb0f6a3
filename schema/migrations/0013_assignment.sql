-- spookat schema v13: sharing the work. A conversation's assignee (an operator id, 0 for
-- nobody) and, while its status is 'snoozed', when it reopens by itself (Unix ms). The
-- partial index holds only snoozed conversations: the edge's tick finds the due ones without
-- reading the others.
ALTER TABLE conversations ADD COLUMN assignee_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN snoozed_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX conversations_snoozed ON conversations(snoozed_until) WHERE status = 'snoozed';
-- Assigned conversations only: an operator's removal unassigns theirs without a scan.
CREATE INDEX conversations_assignee ON conversations(assignee_id) WHERE assignee_id != 0;
