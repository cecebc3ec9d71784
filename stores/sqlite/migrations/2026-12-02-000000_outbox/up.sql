-- The outbox: messages a handler stages in its claim's transaction, so they commit
-- with the claim and the handler's writes or not at all, and that a relay sends
-- afterwards, outside any transaction. Times are INTEGER unix microseconds, as in
-- every other hookbox table.
--
-- `seq` is the staging order the relay keeps per ordering key. AUTOINCREMENT: a seq
-- is never reused after a purge, so a lease (seq and token) or an operator's note
-- can never point at another message.
CREATE TABLE hookbox_outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    -- MessageId, derived from the delivery, the handler and the position: a retried
    -- or replayed handler stages the same ids, and UNIQUE keeps the first row
    message_id      TEXT    NOT NULL UNIQUE,
    -- the delivery's dedupe key as hookbox_inbox keeps it: `source` holds
    -- DedupeKey::scope() (source, or source/tenant) and `tenant` is kept apart, so
    -- the key reads back exactly; `provider` also selects the retention
    source          TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    delivery_id     TEXT    NOT NULL,
    tenant          TEXT,
    handler         TEXT    NOT NULL,
    sequence        INTEGER NOT NULL,
    sink            TEXT    NOT NULL,
    ordering_key    TEXT,
    payload         BLOB    NOT NULL,
    -- JSON array of [name, value] pairs (KeptHeaders::to_json)
    headers         TEXT    NOT NULL,
    staged_at       INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    -- sends started, counted when a relay leases the message, so a message whose send
    -- kills the relay still reaches the attempt limit
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    next_attempt_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    -- the relay's lease (SQLite has no row locks): taken in a short transaction
    -- before the send, which runs outside any transaction; a dead relay's lease
    -- expires, and only the token's holder may settle the message
    leased_until    INTEGER,
    lease_token     INTEGER,
    sent_at         INTEGER,
    dead_at         INTEGER
);

-- the relay's due query: pending messages by due time
CREATE INDEX hookbox_outbox_due ON hookbox_outbox (next_attempt_at, seq)
    WHERE sent_at IS NULL AND dead_at IS NULL;
-- the ordering check: is an earlier message of this key still pending?
CREATE INDEX hookbox_outbox_ordering ON hookbox_outbox (ordering_key, seq)
    WHERE sent_at IS NULL AND dead_at IS NULL AND ordering_key IS NOT NULL;
-- purge of sent messages, per provider
CREATE INDEX hookbox_outbox_purge ON hookbox_outbox (provider, sent_at)
    WHERE sent_at IS NOT NULL;
-- dead letters, oldest first
CREATE INDEX hookbox_outbox_dead ON hookbox_outbox (dead_at, seq)
    WHERE dead_at IS NOT NULL;
