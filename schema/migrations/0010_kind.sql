-- spookat schema v10: what a system message is ("" for a message someone wrote): "rating"
-- (the visitor rated the conversation) or "transcript" (the visitor asked for the
-- conversation by email: its one job is that email). Read with the message on replay, so a
-- transcript asked for just before a crash is still sent.
ALTER TABLE messages ADD COLUMN kind TEXT NOT NULL DEFAULT '';
