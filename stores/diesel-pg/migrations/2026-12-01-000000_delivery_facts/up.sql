-- What a handler's Delivery view shows besides the bytes and headers: the id shared
-- by deliveries of one change, and the timestamp the provider signed. Nullable:
-- rows received before this migration, and providers that send neither, have none.
ALTER TABLE hookbox_inbox
    ADD COLUMN correlation_id TEXT,
    ADD COLUMN signed_at      TIMESTAMPTZ;
