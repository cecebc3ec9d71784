ALTER TABLE hookbox_inbox DROP COLUMN signed_at;
ALTER TABLE hookbox_inbox DROP COLUMN correlation_id;
