-- What verification read about a delivery besides its key, kept so that a worker's
-- handler sees the same Delivery an inline handler does. Both nullable: not every
-- provider sends a correlation id or signs a timestamp, and rows stored before this
-- migration have neither.

-- VerifiedDelivery::correlation_id: the id shared by deliveries of one change
ALTER TABLE hookbox_inbox ADD COLUMN correlation_id TEXT;
-- VerifiedDelivery::signed_at: the timestamp the provider signed, unix microseconds
ALTER TABLE hookbox_inbox ADD COLUMN signed_at INTEGER;
