//! The outbox's operator verbs on SQLite, [`OutboxAdmin`] for [`SqliteStore`]: one
//! message by id, the filtered lists and counts, a replay of one message or of the
//! dead ones a filter selects, the counts per state and per sink, and the purge of sent messages (its deletes in
//! [`purge`](crate::purge)). Each runs on a pooled connection in autocommit.

use diesel::OptionalExtension as _;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl as _;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, BoxFuture, MessageId, OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStats,
    SinkCounts,
};

use crate::error::{SqliteError, boxed_any};
use crate::filter::{Cursor, outbox_where};
use crate::purge::purge_sent;
use crate::rows::{Count, OutboxRow, from_micros, select_outbox};
use crate::store::SqliteStore;

/// The row of [`OUTBOX_STATS`].
#[derive(diesel::QueryableByName)]
struct Stats {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    sent: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    oldest_pending: Option<i64>,
}

/// One message. Binds: message_id.
const OUTBOX_GET: &str = select_outbox!("WHERE message_id = ?");

/// One message by id, `None` when there is none ([`OutboxAdmin::get`]).
async fn get(store: &SqliteStore, id: &MessageId) -> Result<Option<OutboxMessage>, SqliteError> {
    let mut conn = store.connection().await?;
    let row = diesel::sql_query(OUTBOX_GET)
        .bind::<Text, _>(id.as_str())
        .get_result::<OutboxRow>(&mut *conn)
        .await
        .optional()?;
    row.map(OutboxRow::into_message).transpose()
}

/// Up to `limit` messages `filter` selects, newest first ([`OutboxAdmin::list`]); a
/// row that cannot be read back fails the whole list with
/// `SqliteError::OutboxCorrupt`, naming its seq.
async fn list(
    store: &SqliteStore,
    filter: OutboxFilter,
    limit: u32,
) -> Result<Vec<OutboxMessage>, SqliteError> {
    let clause = outbox_where(&filter, Cursor::Keep);
    let sql = format!(
        "{} {} ORDER BY seq DESC LIMIT ?",
        select_outbox!(""),
        clause.sql()
    );
    let query = clause.query(sql).bind::<BigInt, _>(i64::from(limit));
    let mut conn = store.connection().await?;
    let rows = query.load::<OutboxRow>(&mut *conn).await?;
    rows.into_iter().map(OutboxRow::into_message).collect()
}

/// How many messages `filter` selects, its cursor ignored ([`OutboxAdmin::count`]).
async fn count(store: &SqliteStore, filter: OutboxFilter) -> Result<u64, SqliteError> {
    let clause = outbox_where(&filter, Cursor::Ignore);
    let sql = format!("SELECT COUNT(*) AS n FROM hookbox_outbox {}", clause.sql());
    let mut conn = store.connection().await?;
    let counted = clause.query(sql).get_result::<Count>(&mut *conn).await?;
    Ok(u64::try_from(counted.n).unwrap_or(0))
}

/// Makes one sent or dead message due now (the database's clock) with its attempts
/// reset; `last_error` stays, for the record. Binds: message_id.
const OUTBOX_REPLAY: &str = "UPDATE hookbox_outbox \
     SET sent_at = NULL, dead_at = NULL, attempts = 0, \
     next_attempt_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER), \
     leased_until = NULL, lease_token = NULL \
     WHERE message_id = ? AND (sent_at IS NOT NULL OR dead_at IS NOT NULL)";

/// Makes one sent or dead message pending again; `false` when there is no such
/// message ([`OutboxAdmin::replay`]).
async fn replay(store: &SqliteStore, id: &MessageId) -> Result<bool, SqliteError> {
    let mut conn = store.connection().await?;
    let replayed = diesel::sql_query(OUTBOX_REPLAY)
        .bind::<Text, _>(id.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(replayed == 1)
}

/// Makes every dead message `filter` selects pending again, as [`OUTBOX_REPLAY`]
/// does one; returns how many ([`OutboxAdmin::replay_matching`]).
async fn replay_matching(store: &SqliteStore, filter: OutboxFilter) -> Result<u64, SqliteError> {
    let clause = outbox_where(&filter, Cursor::Ignore);
    let sql = format!(
        "UPDATE hookbox_outbox SET dead_at = NULL, attempts = 0, \
           next_attempt_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER), \
           leased_until = NULL, lease_token = NULL {} AND dead_at IS NOT NULL",
        clause.sql()
    );
    let mut conn = store.connection().await?;
    let replayed = clause.query(sql).execute(&mut *conn).await?;
    Ok(replayed as u64)
}

/// `OutboxAdmin::sinks` in one statement.
const PER_SINK: &str = "SELECT sink, \
     SUM(sent_at IS NULL AND dead_at IS NULL) AS pending, \
     SUM(sent_at IS NOT NULL) AS sent, \
     SUM(dead_at IS NOT NULL) AS dead, \
     MIN(CASE WHEN sent_at IS NULL AND dead_at IS NULL THEN staged_at END) AS oldest_pending \
     FROM hookbox_outbox GROUP BY sink ORDER BY sink";

/// The row of [`PER_SINK`].
#[derive(diesel::QueryableByName)]
struct SinkRow {
    #[diesel(sql_type = Text)]
    sink: String,
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    sent: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    oldest_pending: Option<i64>,
}

/// The counts per sink ([`OutboxAdmin::sinks`]).
async fn sinks(store: &SqliteStore) -> Result<Vec<SinkCounts>, SqliteError> {
    let mut conn = store.connection().await?;
    let rows = diesel::sql_query(PER_SINK)
        .load::<SinkRow>(&mut *conn)
        .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(rows
        .into_iter()
        .map(|row| SinkCounts {
            sink: row.sink,
            pending: count(row.pending),
            sent: count(row.sent),
            dead: count(row.dead),
            oldest_pending: row.oldest_pending.and_then(from_micros),
        })
        .collect())
}

/// `OutboxAdmin::stats` in one statement.
const OUTBOX_STATS: &str = "SELECT \
     (SELECT COUNT(*) FROM hookbox_outbox WHERE sent_at IS NULL AND dead_at IS NULL) \
     AS pending, \
     (SELECT COUNT(*) FROM hookbox_outbox WHERE sent_at IS NOT NULL) AS sent, \
     (SELECT COUNT(*) FROM hookbox_outbox WHERE dead_at IS NOT NULL) AS dead, \
     (SELECT MIN(staged_at) FROM hookbox_outbox WHERE sent_at IS NULL AND dead_at IS NULL) \
     AS oldest_pending";

/// The counts of pending, sent and dead messages and the oldest pending one's
/// staging time ([`OutboxAdmin::stats`]), in one statement.
async fn stats(store: &SqliteStore) -> Result<OutboxStats, SqliteError> {
    let mut conn = store.connection().await?;
    let stats = diesel::sql_query(OUTBOX_STATS)
        .get_result::<Stats>(&mut *conn)
        .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(OutboxStats {
        pending: count(stats.pending),
        sent: count(stats.sent),
        dead: count(stats.dead),
        oldest_pending: stats.oldest_pending.and_then(from_micros),
    })
}

/// Deletes sent messages past their retention ([`OutboxAdmin::purge`]).
async fn purge(store: &SqliteStore, now: OffsetDateTime) -> Result<u64, SqliteError> {
    let mut conn = store.connection().await?;
    purge_sent(&mut conn, &store.inner.options.retention, now).await
}

impl OutboxAdmin for SqliteStore {
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>> {
        boxed_any(stats(self))
    }

    fn sinks(&self) -> BoxFuture<'_, Result<Vec<SinkCounts>, AnyStoreError>> {
        boxed_any(sinks(self))
    }

    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
        boxed_any(list(self, filter, limit))
    }

    fn count(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(count(self, filter))
    }

    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>> {
        boxed_any(get(self, id))
    }

    fn replay<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>> {
        boxed_any(replay(self, id))
    }

    fn replay_matching(&self, filter: OutboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(replay_matching(self, filter))
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(purge(self, now))
    }
}
