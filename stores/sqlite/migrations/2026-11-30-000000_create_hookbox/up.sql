-- hookbox on SQLite. Every time is INTEGER unix microseconds (UTC): exact, sortable,
-- and the same in every process that opens the file.

-- Dedupe keys claimed by process_once / claim. `source` holds DedupeKey::scope()
-- (the source, or source/tenant). WITHOUT ROWID: the key is the table.
CREATE TABLE hookbox_processed_keys (
    source      TEXT    NOT NULL,
    provider    TEXT    NOT NULL,
    delivery_id TEXT    NOT NULL,
    received_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    PRIMARY KEY (source, provider, delivery_id)
) WITHOUT ROWID;

-- purge: per provider, oldest first
CREATE INDEX hookbox_processed_keys_purge ON hookbox_processed_keys (provider, received_at);

-- The inbox: the raw delivery, durable before the 2xx, and the worker's bookkeeping.
-- The UNIQUE key is the dedupe key; `tenant` is kept apart as well so the key reads
-- back exactly. AUTOINCREMENT: an id is never reused after a purge, so an operator's
-- `replay <id>` can never hit another delivery.
CREATE TABLE hookbox_inbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source          TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    delivery_id     TEXT    NOT NULL,
    tenant          TEXT,
    event_type      TEXT,
    body            BLOB    NOT NULL,
    -- JSON array of [name, value] pairs, in the order verification read them
    headers         TEXT    NOT NULL,
    received_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    processed_at    INTEGER,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    next_attempt_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    dead_at         INTEGER,
    -- the worker's lease: taken in a short transaction before the handler runs, so
    -- several tasks or processes never take one row; a killed worker's lease expires
    leased_until    INTEGER,
    lease_token     INTEGER,
    UNIQUE (source, provider, delivery_id)
);

-- the worker's due query
CREATE INDEX hookbox_inbox_due ON hookbox_inbox (next_attempt_at, id)
    WHERE processed_at IS NULL AND dead_at IS NULL;
-- purge of processed rows, per provider
CREATE INDEX hookbox_inbox_processed ON hookbox_inbox (provider, received_at)
    WHERE processed_at IS NOT NULL AND dead_at IS NULL;
-- dead letters, oldest first
CREATE INDEX hookbox_inbox_dead ON hookbox_inbox (dead_at, id)
    WHERE dead_at IS NOT NULL;

-- VersionGuard::advance: the last applied version per object
CREATE TABLE hookbox_versions (
    object  TEXT    NOT NULL PRIMARY KEY,
    version INTEGER NOT NULL
) WITHOUT ROWID;

-- VersionGuard::advance_at: the last applied time per object (unix microseconds)
CREATE TABLE hookbox_version_times (
    object    TEXT    NOT NULL PRIMARY KEY,
    at_micros INTEGER NOT NULL
) WITHOUT ROWID;
