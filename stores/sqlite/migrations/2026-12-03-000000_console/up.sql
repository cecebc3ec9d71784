-- The console's "dead letters of one provider", newest first: partial, so a row
-- enters it only when it becomes a dead letter (the receive path never writes it).
CREATE INDEX hookbox_inbox_dead_by_provider ON hookbox_inbox (provider, id)
    WHERE dead_at IS NOT NULL;
