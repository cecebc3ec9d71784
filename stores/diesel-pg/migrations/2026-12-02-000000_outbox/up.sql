-- The outbox: messages a handler stages in its claim's transaction, so they commit
-- with the claim and the handler's writes or not at all, and that a relay sends
-- afterwards, outside any transaction.
CREATE TABLE hookbox_outbox (
    -- the staging order, which the relay keeps per ordering key; a sequence never
    -- hands out a number twice, so a lease (seq and token) or an operator's note can
    -- never point at another message after a purge
    seq             BIGSERIAL   PRIMARY KEY,
    -- MessageId, derived from the delivery, the handler and the position: a retried
    -- or replayed handler stages the same ids, and UNIQUE keeps the first row
    message_id      TEXT        NOT NULL UNIQUE,
    -- the delivery's dedupe key as hookbox_inbox keeps it: `source` holds
    -- DedupeKey::scope() (the source, or source/tenant) and `tenant` the tenant
    -- alone, so the key reads back exactly; `provider` also selects the retention
    source          TEXT        NOT NULL,
    provider        TEXT        NOT NULL,
    delivery_id     TEXT        NOT NULL,
    tenant          TEXT,
    handler         TEXT        NOT NULL,
    -- the message's position in its handler run, from 0
    sequence        INTEGER     NOT NULL,
    sink            TEXT        NOT NULL,
    ordering_key    TEXT,
    payload         BYTEA       NOT NULL,
    -- JSON array of [name, value] pairs (KeptHeaders::to_json)
    headers         TEXT        NOT NULL,
    staged_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- sends started, counted when a relay leases the message, so a message whose
    -- send kills the relay still reaches the attempt limit
    attempts        INTEGER     NOT NULL DEFAULT 0,
    last_error      TEXT,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- the relay's lease: the send runs outside any transaction, so no row lock can
    -- outlive the short leasing transaction; a dead relay's lease expires instead,
    -- and only the holder of the token may settle the message
    leased_until    TIMESTAMPTZ,
    lease_token     BIGINT,
    sent_at         TIMESTAMPTZ,
    dead_at         TIMESTAMPTZ
);
-- the relay's due query: pending messages by due time
CREATE INDEX hookbox_outbox_due ON hookbox_outbox (next_attempt_at, seq)
    WHERE sent_at IS NULL AND dead_at IS NULL;
-- the ordering check: is an earlier message of this key still pending?
CREATE INDEX hookbox_outbox_ordering ON hookbox_outbox (ordering_key, seq)
    WHERE sent_at IS NULL AND dead_at IS NULL AND ordering_key IS NOT NULL;
-- purge: sent messages of one provider by age (pending and dead ones are kept)
CREATE INDEX hookbox_outbox_purge ON hookbox_outbox (provider, sent_at)
    WHERE sent_at IS NOT NULL;
-- dead letters, oldest first
CREATE INDEX hookbox_outbox_dead ON hookbox_outbox (dead_at, seq)
    WHERE dead_at IS NOT NULL;
