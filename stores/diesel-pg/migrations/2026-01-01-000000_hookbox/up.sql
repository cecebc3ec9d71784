-- Dedupe keys claimed in the same transaction as the side effect.
-- `source` holds DedupeKey::scope(): the source, or source/tenant.
CREATE TABLE hookbox_processed_keys (
    source      TEXT        NOT NULL,
    provider    TEXT        NOT NULL,
    delivery_id TEXT        NOT NULL,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, provider, delivery_id)
);
-- purge: keys of one provider older than its retention
CREATE INDEX hookbox_processed_keys_purge ON hookbox_processed_keys (provider, received_at);

-- The inbox: deliveries acknowledged before processing.
CREATE TABLE hookbox_inbox (
    id              BIGSERIAL   PRIMARY KEY,
    -- DedupeKey::scope(): the source, or source/tenant
    source          TEXT        NOT NULL,
    provider        TEXT        NOT NULL,
    delivery_id     TEXT        NOT NULL,
    -- the tenant alone, to rebuild the DedupeKey (not part of the unique key)
    tenant          TEXT,
    event_type      TEXT,
    body            BYTEA       NOT NULL,
    -- JSON array of [name, value] pairs (KeptHeaders)
    headers         TEXT        NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    processed_at    TIMESTAMPTZ,
    attempts        INTEGER     NOT NULL DEFAULT 0,
    last_error      TEXT,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    dead_at         TIMESTAMPTZ,
    UNIQUE (source, provider, delivery_id)
);
-- the worker's due query: pending rows by next_attempt_at
CREATE INDEX hookbox_inbox_due ON hookbox_inbox (next_attempt_at, id)
    WHERE processed_at IS NULL AND dead_at IS NULL;
-- purge: processed rows of one provider by age
CREATE INDEX hookbox_inbox_purge ON hookbox_inbox (provider, received_at)
    WHERE processed_at IS NOT NULL AND dead_at IS NULL;
-- dead letters, oldest first
CREATE INDEX hookbox_inbox_dead ON hookbox_inbox (dead_at, id)
    WHERE dead_at IS NOT NULL;

-- Per-object versions for VersionGuard::advance.
CREATE TABLE hookbox_versions (
    object  TEXT   PRIMARY KEY,
    version BIGINT NOT NULL
);

-- Per-object times (unix microseconds) for VersionGuard::advance_at.
CREATE TABLE hookbox_version_times (
    object    TEXT   PRIMARY KEY,
    at_micros BIGINT NOT NULL
);
