//! Every statement the store runs, in one place: the tables for diesel's query
//! builder, the prepared hot statements, and the SQL text of the inbox, the worker,
//! the outbox and the purge (the schema itself is in `migrations/`).
//!
//! diesel caches a statement only when its type identifies its SQL: a query-builder
//! `insert_into` or `select` is cached, while `sql_query` text and any upsert with
//! `DO UPDATE` are parsed and planned again on every call. The claim and the
//! outbox's stage are therefore plain builder inserts ([`claim_query!`],
//! [`stage_query!`]), and the version guards' conditional upserts are small
//! [`QueryFragment`]s with a static query id; the rest runs less often and is plain
//! text.
//!
//! Every time is bound as unix microseconds (`BigInt`).

use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Binary, Nullable, Text};
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel::{QueryResult, RunQueryDsl};

diesel::table! {
    hookbox_processed_keys (source, provider, delivery_id) {
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        received_at -> BigInt,
    }
}

diesel::table! {
    hookbox_version_times (object) {
        object -> Text,
        at_micros -> BigInt,
    }
}

/// The claim for `$key`: `INSERT … ON CONFLICT DO NOTHING`; one row inserted means
/// this transaction claimed the key. Built (not `sql_query`) so that it is prepared
/// once per connection; a macro because the sync and async paths run it through
/// different `RunQueryDsl` traits.
macro_rules! claim_query {
    ($key:expr) => {{
        use crate::sql::hookbox_processed_keys::dsl as keys;
        use diesel::ExpressionMethods as _;
        let key: &hookbox_core::DedupeKey = $key;
        diesel::insert_into(keys::hookbox_processed_keys)
            .values((
                keys::source.eq(key.scope()),
                keys::provider.eq(key.provider()),
                keys::delivery_id.eq(key.delivery_id()),
                keys::received_at.eq(crate::rows::micros(
                    hookbox_core::time::OffsetDateTime::now_utc(),
                )),
            ))
            .on_conflict_do_nothing()
    }};
}
pub(crate) use claim_query;

/// Stores `version` for `object` only when it is newer; the upsert's `WHERE` makes
/// "not newer" a no-op (zero rows changed).
pub(crate) struct AdvanceVersion<'a> {
    pub(crate) object: &'a str,
    pub(crate) version: i64,
}

impl QueryId for AdvanceVersion<'_> {
    type QueryId = AdvanceVersion<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for AdvanceVersion<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO hookbox_versions (object, version) VALUES (");
        out.push_bind_param::<Text, _>(self.object)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.version)?;
        out.push_sql(
            ") ON CONFLICT (object) DO UPDATE SET version = excluded.version \
             WHERE excluded.version > hookbox_versions.version",
        );
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for AdvanceVersion<'_> {}

/// Stores `at_micros` for `object` only when it is strictly later.
pub(crate) struct AdvanceTime<'a> {
    pub(crate) object: &'a str,
    pub(crate) at_micros: i64,
}

impl QueryId for AdvanceTime<'_> {
    type QueryId = AdvanceTime<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for AdvanceTime<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO hookbox_version_times (object, at_micros) VALUES (");
        out.push_bind_param::<Text, _>(self.object)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.at_micros)?;
        out.push_sql(
            ") ON CONFLICT (object) DO UPDATE SET at_micros = excluded.at_micros \
             WHERE excluded.at_micros > hookbox_version_times.at_micros",
        );
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for AdvanceTime<'_> {}

/// `SELECT <every column InboxRow reads> FROM hookbox_inbox <rest>`, as a literal.
macro_rules! select_inbox {
    ($rest:literal) => {
        concat!(
            "SELECT id, source, provider, delivery_id, tenant, event_type, correlation_id, \
             signed_at, body, headers, received_at, processed_at, attempts, last_error, \
             next_attempt_at, dead_at, lease_token FROM hookbox_inbox ",
            $rest
        )
    };
}

/// `Inbox::receive`'s insert, prepared once per connection: `ON CONFLICT DO NOTHING`,
/// so zero rows changed means the key was stored already. Binds, in order: source,
/// provider, delivery_id, tenant, event_type, correlation_id, signed_at, body,
/// headers (the core's JSON), received_at, next_attempt_at.
pub(crate) struct ReceiveRow<'a> {
    pub(crate) source: &'a str,
    pub(crate) provider: &'a str,
    pub(crate) delivery_id: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) event_type: Option<&'a str>,
    pub(crate) correlation_id: Option<&'a str>,
    pub(crate) signed_at: Option<i64>,
    pub(crate) body: &'a [u8],
    pub(crate) headers: &'a str,
    pub(crate) received_at: i64,
}

impl QueryId for ReceiveRow<'_> {
    type QueryId = ReceiveRow<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for ReceiveRow<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO hookbox_inbox (source, provider, delivery_id, tenant, event_type, \
             correlation_id, signed_at, body, headers, received_at, next_attempt_at) VALUES (",
        );
        out.push_bind_param::<Text, _>(self.source)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.provider)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.delivery_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.tenant)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.event_type)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.correlation_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<BigInt>, _>(&self.signed_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Binary, _>(self.body)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.headers)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.received_at)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.received_at)?;
        out.push_sql(") ON CONFLICT DO NOTHING");
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for ReceiveRow<'_> {}

/// Group commit's duplicate check on the lookup connection, prepared once: one row
/// (`1`) when the inbox holds the key.
pub(crate) struct InboxHas<'a> {
    pub(crate) source: &'a str,
    pub(crate) provider: &'a str,
    pub(crate) delivery_id: &'a str,
}

impl QueryId for InboxHas<'_> {
    type QueryId = InboxHas<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for InboxHas<'_> {
    type SqlType = BigInt;
}

impl QueryFragment<Sqlite> for InboxHas<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("SELECT 1 FROM hookbox_inbox WHERE source = ");
        out.push_bind_param::<Text, _>(self.source)?;
        out.push_sql(" AND provider = ");
        out.push_bind_param::<Text, _>(self.provider)?;
        out.push_sql(" AND delivery_id = ");
        out.push_bind_param::<Text, _>(self.delivery_id)?;
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for InboxHas<'_> {}

/// Up to `limit` due rows no live lease holds, in due order. Binds: now, limit.
pub(crate) const DUE_ROWS: &str = select_inbox!(
    "WHERE processed_at IS NULL AND dead_at IS NULL \
     AND next_attempt_at <= ?1 AND (leased_until IS NULL OR leased_until <= ?1) \
     ORDER BY next_attempt_at, id LIMIT ?2"
);

/// Takes the lease on the rows whose ids follow (written into the statement, see
/// [`id_list`]) and counts their attempt; a row that still carried a lease was
/// interrupted, and says so in `last_error`. `next_attempt_at` moves with the lease
/// so the due index skips leased rows. Binds: leased_until, token, the interrupted
/// text.
pub(crate) const TAKE_LEASES: &str = "UPDATE hookbox_inbox SET attempts = attempts + 1, \
     leased_until = ?1, next_attempt_at = ?1, lease_token = ?2, \
     last_error = CASE WHEN lease_token IS NULL THEN last_error ELSE ?3 END \
     WHERE id IN ";

/// Which of the ids that follow a lease token still holds, as `count`. Binds: token.
/// (By id, not by token alone: `lease_token` has no index, and a scan of the whole
/// inbox per batch cost more than the batch.)
pub(crate) const LEASED_TO: &str = "SELECT id AS count FROM hookbox_inbox \
     WHERE lease_token = ? AND processed_at IS NULL AND id IN ";

/// The handlers succeeded: processed, the attempt un-counted, the lease cleared, for
/// the ids that follow while `token` holds them. Binds: processed_at, token.
pub(crate) const MARK_PROCESSED: &str = "UPDATE hookbox_inbox SET processed_at = ?1, \
     attempts = attempts - 1, leased_until = NULL, lease_token = NULL \
     WHERE lease_token = ?2 AND id IN ";

/// Of the ids that follow, the rows a lease token still holds that the batch did not
/// start: due again now with the attempt un-counted and the lease cleared. Binds:
/// now, token.
pub(crate) const RELEASE_LEASES: &str = "UPDATE hookbox_inbox SET attempts = attempts - 1, \
     next_attempt_at = ?1, leased_until = NULL, lease_token = NULL \
     WHERE lease_token = ?2 AND processed_at IS NULL AND id IN ";

/// `(1, 2, 3)`: row ids written into a statement (integers, so nothing to escape;
/// one statement instead of one per row).
pub(crate) fn id_list(ids: impl IntoIterator<Item = i64>) -> String {
    let mut list = String::from("(");
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            list.push_str(", ");
        }
        list.push_str(&id.to_string());
    }
    list.push(')');
    list
}

/// A row's attempts, as `count`. Binds: id.
pub(crate) const ATTEMPTS: &str = "SELECT attempts AS count FROM hookbox_inbox WHERE id = ?";

/// The handler failed: the error, the next attempt, maybe dead; the lease cleared,
/// while `token` holds the row. Binds: last_error, next_attempt_at, dead_at, id, token.
pub(crate) const RECORD_FAILURE: &str = "UPDATE hookbox_inbox SET last_error = ?, \
     next_attempt_at = ?, dead_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE id = ? AND lease_token = ?";

/// Makes a row a dead letter now. Binds: dead_at, last_error, attempts to add
/// (0 or 1), id.
pub(crate) const DEAD_LETTER: &str = "UPDATE hookbox_inbox SET dead_at = ?, last_error = ?, \
     attempts = attempts + ?, leased_until = NULL, lease_token = NULL WHERE id = ?";

/// One row. Binds: id.
pub(crate) const GET: &str = select_inbox!("WHERE id = ?");

/// `InboxAdmin::list` with `InboxFilter::Pending`, by due time. Binds: limit.
pub(crate) const LIST_PENDING: &str = select_inbox!(
    "WHERE processed_at IS NULL AND dead_at IS NULL ORDER BY next_attempt_at, id LIMIT ?"
);
/// `InboxFilter::Processed`, newest first. Binds: limit.
pub(crate) const LIST_PROCESSED: &str =
    select_inbox!("WHERE processed_at IS NOT NULL ORDER BY processed_at DESC, id DESC LIMIT ?");
/// `InboxFilter::Dead`, oldest first. Binds: limit.
pub(crate) const LIST_DEAD: &str =
    select_inbox!("WHERE dead_at IS NOT NULL ORDER BY dead_at, id LIMIT ?");
/// `InboxFilter::All`, newest first. Binds: limit.
pub(crate) const LIST_ALL: &str = select_inbox!("ORDER BY id DESC LIMIT ?");

/// Makes one dead letter due again with its attempts reset; `last_error` stays, for
/// the record. Binds: next_attempt_at, id.
pub(crate) const REPLAY: &str = "UPDATE hookbox_inbox SET attempts = 0, dead_at = NULL, \
     next_attempt_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE id = ? AND dead_at IS NOT NULL";

/// [`REPLAY`] for every dead letter (`InboxAdmin::replay_matching`). Binds:
/// next_attempt_at.
pub(crate) const REPLAY_DEAD: &str = "UPDATE hookbox_inbox SET attempts = 0, dead_at = NULL, \
     next_attempt_at = ?, leased_until = NULL, lease_token = NULL WHERE dead_at IS NOT NULL";

/// `InboxAdmin::stats` in one statement.
pub(crate) const STATS: &str = "SELECT \
     (SELECT COUNT(*) FROM hookbox_inbox \
      WHERE processed_at IS NULL AND dead_at IS NULL) AS pending, \
     (SELECT COUNT(*) FROM hookbox_inbox \
      WHERE processed_at IS NOT NULL AND dead_at IS NULL) AS processed, \
     (SELECT COUNT(*) FROM hookbox_inbox WHERE dead_at IS NOT NULL) AS dead, \
     (SELECT MIN(received_at) FROM hookbox_inbox \
      WHERE processed_at IS NULL AND dead_at IS NULL) AS oldest_pending";

/// Deletes up to a batch of one provider's expired keys. Binds: provider, cutoff,
/// batch size.
pub(crate) const PURGE_KEYS: &str = "DELETE FROM hookbox_processed_keys \
     WHERE (source, provider, delivery_id) IN \
     (SELECT source, provider, delivery_id FROM hookbox_processed_keys \
      WHERE provider = ? AND received_at < ? LIMIT ?)";
/// Deletes up to a batch of one provider's expired processed rows (never pending
/// rows or dead letters). Binds: provider, cutoff, batch size.
pub(crate) const PURGE_ROWS: &str = "DELETE FROM hookbox_inbox WHERE id IN \
     (SELECT id FROM hookbox_inbox WHERE provider = ? AND received_at < ? \
      AND processed_at IS NOT NULL AND dead_at IS NULL LIMIT ?)";
/// [`PURGE_KEYS`] for every provider without a rule of its own. Binds: a JSON
/// array of the providers that have one, cutoff, batch size.
pub(crate) const PURGE_KEYS_OF_OTHERS: &str = "DELETE FROM hookbox_processed_keys \
     WHERE (source, provider, delivery_id) IN \
     (SELECT source, provider, delivery_id FROM hookbox_processed_keys \
      WHERE provider NOT IN (SELECT value FROM json_each(?)) AND received_at < ? LIMIT ?)";
/// [`PURGE_ROWS`] for every provider without a rule of its own. Binds as
/// [`PURGE_KEYS_OF_OTHERS`].
pub(crate) const PURGE_ROWS_OF_OTHERS: &str = "DELETE FROM hookbox_inbox WHERE id IN \
     (SELECT id FROM hookbox_inbox \
      WHERE provider NOT IN (SELECT value FROM json_each(?)) AND received_at < ? \
      AND processed_at IS NOT NULL AND dead_at IS NULL LIMIT ?)";

// the columns `stage_query!` writes (and the key); the others take their defaults
// and are read and written with the SQL text below
diesel::table! {
    hookbox_outbox (seq) {
        seq -> BigInt,
        message_id -> Text,
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        tenant -> Nullable<Text>,
        handler -> Text,
        sequence -> BigInt,
        sink -> Text,
        ordering_key -> Nullable<Text>,
        payload -> Binary,
        headers -> Text,
    }
}

/// `OutboxStore::stage` for `$message` (a `&StagedMessage`): `INSERT … ON CONFLICT
/// (message_id) DO NOTHING`, so a message staged again (a retried handler, a
/// replayed delivery) keeps its first row; one row inserted means it is new.
/// `staged_at` and `next_attempt_at` take the column defaults. Built (not
/// `sql_query`), like [`claim_query!`], so that a handler staging on every delivery
/// reuses one prepared statement per connection.
macro_rules! stage_query {
    ($message:expr) => {{
        use crate::sql::hookbox_outbox::dsl as outbox;
        use diesel::ExpressionMethods as _;
        let staged: &hookbox_core::spi::StagedMessage = $message;
        diesel::insert_into(outbox::hookbox_outbox)
            .values((
                outbox::message_id.eq(staged.id.as_str()),
                outbox::source.eq(staged.key.scope()),
                outbox::provider.eq(staged.key.provider()),
                outbox::delivery_id.eq(staged.key.delivery_id()),
                outbox::tenant.eq(staged.key.tenant()),
                outbox::handler.eq(staged.handler.as_str()),
                outbox::sequence.eq(i64::from(staged.sequence)),
                outbox::sink.eq(staged.message.sink()),
                outbox::ordering_key.eq(staged.message.ordering_key()),
                outbox::payload.eq(staged.message.payload().as_ref()),
                outbox::headers.eq(staged.message.headers().to_json()),
            ))
            .on_conflict(outbox::message_id)
            .do_nothing()
    }};
}
pub(crate) use stage_query;

/// `SELECT <every column OutboxRow reads> FROM hookbox_outbox <rest>`, as a literal.
macro_rules! select_outbox {
    ($rest:literal) => {
        concat!(
            "SELECT seq, message_id, source, provider, delivery_id, tenant, handler, sequence, \
             sink, ordering_key, payload, headers, staged_at, attempts, last_error, \
             next_attempt_at, sent_at, dead_at FROM hookbox_outbox ",
            $rest
        )
    };
}

/// The messages a relay may send now, in staging order: pending, due, no live
/// lease, and no earlier message of their ordering key still pending (one leased by
/// another relay counts: it may yet fail and be retried, and the order per key must
/// hold). Binds: now, limit.
///
/// `INDEXED BY` the due index: left to itself the planner walks the table in `seq`
/// order for the `ORDER BY … LIMIT`, through every sent message the retention
/// keeps (all older than the pending ones) on every poll; the index holds pending
/// messages only, which are then sorted.
pub(crate) const OUTBOX_DUE: &str = select_outbox!(
    "AS o INDEXED BY hookbox_outbox_due WHERE sent_at IS NULL AND dead_at IS NULL \
     AND next_attempt_at <= ?1 AND (leased_until IS NULL OR leased_until <= ?1) \
     AND (ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM hookbox_outbox AS e \
          WHERE e.ordering_key = o.ordering_key AND e.seq < o.seq \
          AND e.sent_at IS NULL AND e.dead_at IS NULL)) \
     ORDER BY seq LIMIT ?2"
);

/// Leases one message and counts the attempt. Binds: leased_until, token, seq.
pub(crate) const OUTBOX_TAKE_LEASE: &str = "UPDATE hookbox_outbox \
     SET attempts = attempts + 1, leased_until = ?, lease_token = ? WHERE seq = ?";

/// Makes a message that cannot be read back a dead letter during a lease, so it
/// never blocks the messages behind it. Binds: dead_at, last_error, seq.
pub(crate) const OUTBOX_DEAD_UNREADABLE: &str = "UPDATE hookbox_outbox SET dead_at = ?, \
     last_error = ?, leased_until = NULL, lease_token = NULL WHERE seq = ?";

/// `Settlement::Sent`, while the lease is still the caller's; the lease cleared.
/// Binds: sent_at, seq, token.
pub(crate) const OUTBOX_SENT: &str = "UPDATE hookbox_outbox \
     SET sent_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// `Settlement::Retry`, while the lease is still the caller's; the lease cleared.
/// Binds: last_error, next_attempt_at, seq, token.
pub(crate) const OUTBOX_RETRY: &str = "UPDATE hookbox_outbox \
     SET last_error = ?, next_attempt_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// `Settlement::Dead`, while the lease is still the caller's; the lease cleared.
/// Binds: dead_at, last_error, seq, token.
pub(crate) const OUTBOX_DEAD: &str = "UPDATE hookbox_outbox \
     SET dead_at = ?, last_error = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// `Settlement::Release`, while the lease is still the caller's: the lease cleared
/// and its attempt given back. Binds: last_error, next_attempt_at, seq, token.
pub(crate) const OUTBOX_RELEASE: &str = "UPDATE hookbox_outbox \
     SET attempts = MAX(attempts - 1, 0), last_error = ?, next_attempt_at = ?, \
     leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// One message. Binds: message_id.
pub(crate) const OUTBOX_GET: &str = select_outbox!("WHERE message_id = ?");

/// `OutboxAdmin::list` with `OutboxFilter::Pending`, in staging order (through
/// the due index, for the reason [`OUTBOX_DUE`] gives). Binds: limit.
pub(crate) const OUTBOX_LIST_PENDING: &str = select_outbox!(
    "INDEXED BY hookbox_outbox_due WHERE sent_at IS NULL AND dead_at IS NULL \
     ORDER BY seq LIMIT ?"
);
/// `OutboxFilter::Sent`, the most recent first. Binds: limit.
pub(crate) const OUTBOX_LIST_SENT: &str =
    select_outbox!("WHERE sent_at IS NOT NULL ORDER BY sent_at DESC, seq DESC LIMIT ?");
/// `OutboxFilter::Dead`, the oldest first. Binds: limit.
pub(crate) const OUTBOX_LIST_DEAD: &str =
    select_outbox!("WHERE dead_at IS NOT NULL ORDER BY dead_at, seq LIMIT ?");
/// `OutboxFilter::All`, the newest first. Binds: limit.
pub(crate) const OUTBOX_LIST_ALL: &str = select_outbox!("ORDER BY seq DESC LIMIT ?");

/// Makes one sent or dead message due now (the database's clock) with its attempts
/// reset; `last_error` stays, for the record. Binds: message_id.
pub(crate) const OUTBOX_REPLAY: &str = "UPDATE hookbox_outbox \
     SET sent_at = NULL, dead_at = NULL, attempts = 0, \
     next_attempt_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER), \
     leased_until = NULL, lease_token = NULL \
     WHERE message_id = ? AND (sent_at IS NOT NULL OR dead_at IS NOT NULL)";

/// [`OUTBOX_REPLAY`] for every dead letter (`OutboxAdmin::replay_matching`).
pub(crate) const OUTBOX_REPLAY_DEAD: &str = "UPDATE hookbox_outbox \
     SET dead_at = NULL, attempts = 0, \
     next_attempt_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER), \
     leased_until = NULL, lease_token = NULL WHERE dead_at IS NOT NULL";

/// `OutboxAdmin::stats` in one statement.
pub(crate) const OUTBOX_STATS: &str = "SELECT \
     (SELECT COUNT(*) FROM hookbox_outbox WHERE sent_at IS NULL AND dead_at IS NULL) \
     AS pending, \
     (SELECT COUNT(*) FROM hookbox_outbox WHERE sent_at IS NOT NULL) AS sent, \
     (SELECT COUNT(*) FROM hookbox_outbox WHERE dead_at IS NOT NULL) AS dead, \
     (SELECT MIN(staged_at) FROM hookbox_outbox WHERE sent_at IS NULL AND dead_at IS NULL) \
     AS oldest_pending";

/// Deletes up to a batch of one provider's sent messages past the cutoff (never
/// pending messages or dead letters). Binds: provider, cutoff, batch size.
pub(crate) const PURGE_OUTBOX: &str = "DELETE FROM hookbox_outbox WHERE seq IN \
     (SELECT seq FROM hookbox_outbox WHERE provider = ? AND sent_at < ? LIMIT ?)";
/// [`PURGE_OUTBOX`] for every provider without a rule of its own. Binds as
/// [`PURGE_KEYS_OF_OTHERS`].
pub(crate) const PURGE_OUTBOX_OF_OTHERS: &str = "DELETE FROM hookbox_outbox WHERE seq IN \
     (SELECT seq FROM hookbox_outbox \
      WHERE provider NOT IN (SELECT value FROM json_each(?)) AND sent_at < ? LIMIT ?)";

/// The readiness check: reads the inbox's first page, writes nothing.
pub(crate) const PING: &str = "SELECT 1 FROM hookbox_inbox LIMIT 1";
