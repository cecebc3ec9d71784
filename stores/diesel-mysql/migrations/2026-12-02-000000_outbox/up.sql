-- The outbox: messages a handler stages in its claim's transaction, so they commit
-- with the claim and the handler's writes or not at all, and that a relay sends
-- afterwards, outside any transaction. Column types as in hookbox_inbox.
CREATE TABLE hookbox_outbox (
    -- the staging order, which the relay keeps per ordering key; InnoDB never hands
    -- an AUTO_INCREMENT value out twice while the server runs (MySQL 8.0 and MariaDB
    -- 10.6 also keep the counter across restarts), so a lease (seq and token) or an
    -- operator's note never points at another message after a purge
    seq             BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    -- MessageId, derived from the delivery, the handler and the position: a retried
    -- or replayed handler stages the same ids, and UNIQUE keeps the first row
    message_id      VARBINARY(255)  NOT NULL,
    -- the delivery's dedupe key as hookbox_inbox keeps it: `source` holds
    -- DedupeKey::scope() (the source, or source/tenant) and `tenant` the tenant
    -- alone, so the key reads back exactly; `provider` also selects the retention
    source          VARBINARY(1024) NOT NULL,
    provider        VARBINARY(128)  NOT NULL,
    delivery_id     VARBINARY(1024) NOT NULL,
    tenant          VARBINARY(1024),
    handler         VARBINARY(1024) NOT NULL,
    -- the message's position in its handler run, from 0
    sequence        INT             NOT NULL,
    sink            VARBINARY(1024) NOT NULL,
    ordering_key    VARBINARY(1024),
    payload         LONGBLOB        NOT NULL,
    -- JSON array of [name, value] pairs (KeptHeaders::to_json)
    headers         MEDIUMTEXT      CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    staged_at       DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    -- sends started, counted when a relay leases the message, so a message whose
    -- send kills the relay still reaches the attempt limit
    attempts        INT             NOT NULL DEFAULT 0,
    last_error      MEDIUMTEXT      CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    next_attempt_at DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    -- the relay's lease: the send runs outside any transaction, so no row lock can
    -- outlive the short leasing transaction; a dead relay's lease expires instead,
    -- and only the holder of the token may settle the message
    leased_until    DATETIME(6),
    lease_token     BIGINT,
    sent_at         DATETIME(6),
    dead_at         DATETIME(6),
    UNIQUE KEY hookbox_outbox_message_id (message_id),
    -- the relay's due query: pending messages (both NULL) by due time
    KEY hookbox_outbox_due (sent_at, dead_at, next_attempt_at, seq),
    -- the ordering check: is an earlier message of this key still pending?
    KEY hookbox_outbox_ordering (ordering_key, seq),
    -- purge: sent messages of one provider by age (pending and dead ones are kept)
    KEY hookbox_outbox_purge (provider, sent_at),
    -- dead letters, oldest first
    KEY hookbox_outbox_dead (dead_at, seq)
) ENGINE = InnoDB ROW_FORMAT = DYNAMIC;
