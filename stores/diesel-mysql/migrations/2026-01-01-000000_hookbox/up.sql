-- MySQL 8.0 and MariaDB 10.6+ (SKIP LOCKED), InnoDB, DYNAMIC rows (index keys up to
-- 3072 bytes). Key columns are VARBINARY: they compare byte for byte, with no
-- collation folding case or accents and no PAD SPACE ignoring trailing spaces
-- (utf8mb4_bin is PAD SPACE on both servers: 'evt_1' = 'evt_1 '), and their sizes
-- are bytes, so the unique keys' lengths are known: 1024 + 128 + 1024 = 2176 bytes.
-- Times are DATETIME(6) in UTC: the store writes UTC_TIMESTAMP(6) and its sessions
-- run with time_zone = '+00:00' (DATETIME is never shifted by a session's zone,
-- unlike TIMESTAMP, and does not end in 2038).

-- Dedupe keys claimed in the same transaction as the side effect.
-- `source` holds DedupeKey::scope(): the source, or source/tenant.
CREATE TABLE hookbox_processed_keys (
    source      VARBINARY(1024) NOT NULL,
    provider    VARBINARY(128)  NOT NULL,
    delivery_id VARBINARY(1024) NOT NULL,
    received_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (source, provider, delivery_id),
    -- purge: keys of one provider older than its retention
    KEY hookbox_processed_keys_purge (provider, received_at)
) ENGINE = InnoDB ROW_FORMAT = DYNAMIC;

-- The inbox: deliveries acknowledged before processing.
CREATE TABLE hookbox_inbox (
    id              BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    -- DedupeKey::scope(): the source, or source/tenant
    source          VARBINARY(1024) NOT NULL,
    provider        VARBINARY(128)  NOT NULL,
    delivery_id     VARBINARY(1024) NOT NULL,
    -- the tenant alone, to rebuild the DedupeKey (not part of the unique key)
    tenant          VARBINARY(1024),
    event_type      VARBINARY(1024),
    body            LONGBLOB        NOT NULL,
    -- JSON array of [name, value] pairs (KeptHeaders)
    headers         MEDIUMTEXT      CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    received_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    processed_at    DATETIME(6),
    attempts        INT             NOT NULL DEFAULT 0,
    last_error      MEDIUMTEXT      CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    next_attempt_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    dead_at         DATETIME(6),
    -- the id shared by deliveries of one change, and the timestamp the provider signed
    correlation_id  VARBINARY(1024),
    signed_at       DATETIME(6),
    UNIQUE KEY hookbox_inbox_key (source, provider, delivery_id),
    -- the worker's due query: pending rows (both NULL) by next_attempt_at; MySQL has
    -- no partial indexes, so the state columns lead
    KEY hookbox_inbox_due (processed_at, dead_at, next_attempt_at, id),
    -- purge: processed rows of one provider by age
    KEY hookbox_inbox_purge (provider, received_at),
    -- dead letters, oldest first
    KEY hookbox_inbox_dead (dead_at, id)
) ENGINE = InnoDB ROW_FORMAT = DYNAMIC;

-- Per-object versions for VersionGuard::advance.
CREATE TABLE hookbox_versions (
    object  VARBINARY(1024) NOT NULL PRIMARY KEY,
    version BIGINT          NOT NULL
) ENGINE = InnoDB ROW_FORMAT = DYNAMIC;

-- Per-object times (unix microseconds) for VersionGuard::advance_at.
CREATE TABLE hookbox_version_times (
    object    VARBINARY(1024) NOT NULL PRIMARY KEY,
    at_micros BIGINT          NOT NULL
) ENGINE = InnoDB ROW_FORMAT = DYNAMIC;
