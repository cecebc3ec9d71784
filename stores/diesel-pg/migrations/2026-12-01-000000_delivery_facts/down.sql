ALTER TABLE hookbox_inbox
    DROP COLUMN signed_at,
    DROP COLUMN correlation_id;
