-- spookat schema v4: the job publisher groups the jobs of a publish window into one JOBS
-- message per lane partition (a batch). Each window's last message id is written here before
-- its batches are published, so that after a crash the edge re-forms the same batches, whose
-- ids JetStream's duplicate window recognises. Rows at or below outbox.published_through are
-- deleted when the watermark is persisted.
CREATE TABLE outbox_cuts (
    through INTEGER PRIMARY KEY
);
