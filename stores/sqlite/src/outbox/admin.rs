//! The outbox's operator verbs on SQLite, [`OutboxAdmin`] for [`SqliteStore`]: one
//! message by id, the lists by state, a replay of one message or of the dead ones,
//! the counts, and the purge of sent messages (its deletes in
//! [`purge`](crate::purge)). Each runs on a pooled connection in autocommit.

use diesel::OptionalExtension as _;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::RunQueryDsl as _;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, BoxFuture, MessageId, OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStats,
};

use crate::error::{SqliteError, boxed_any};
use crate::purge::purge_sent;
use crate::rows::{OutboxRow, from_micros, select_outbox};
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

/// `OutboxAdmin::list` with `OutboxFilter::Pending`, in staging order (through
/// the due index, for the reason
/// [`OUTBOX_DUE`](super::blocking_lease::OUTBOX_DUE) gives). Binds: limit.
const OUTBOX_LIST_PENDING: &str = select_outbox!(
    "INDEXED BY hookbox_outbox_due WHERE sent_at IS NULL AND dead_at IS NULL \
     ORDER BY seq LIMIT ?"
);
/// `OutboxFilter::Sent`, the most recent first. Binds: limit.
const OUTBOX_LIST_SENT: &str =
    select_outbox!("WHERE sent_at IS NOT NULL ORDER BY sent_at DESC, seq DESC LIMIT ?");
/// `OutboxFilter::Dead`, the oldest first. Binds: limit.
const OUTBOX_LIST_DEAD: &str =
    select_outbox!("WHERE dead_at IS NOT NULL ORDER BY dead_at, seq LIMIT ?");
/// `OutboxFilter::All`, the newest first. Binds: limit.
const OUTBOX_LIST_ALL: &str = select_outbox!("ORDER BY seq DESC LIMIT ?");

/// Up to `limit` messages in `filter`'s state and order ([`OutboxAdmin::list`]); a
/// row that cannot be read back fails the whole list with
/// `SqliteError::OutboxCorrupt`, naming its seq.
async fn list(
    store: &SqliteStore,
    filter: OutboxFilter,
    limit: u32,
) -> Result<Vec<OutboxMessage>, SqliteError> {
    let sql = match filter {
        OutboxFilter::Pending => OUTBOX_LIST_PENDING,
        OutboxFilter::Sent => OUTBOX_LIST_SENT,
        OutboxFilter::Dead => OUTBOX_LIST_DEAD,
        OutboxFilter::All => OUTBOX_LIST_ALL,
    };
    let mut conn = store.connection().await?;
    let rows = diesel::sql_query(sql)
        .bind::<BigInt, _>(i64::from(limit))
        .load::<OutboxRow>(&mut *conn)
        .await?;
    rows.into_iter().map(OutboxRow::into_message).collect()
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

/// [`OUTBOX_REPLAY`] for every dead letter (`OutboxAdmin::replay_matching`).
const OUTBOX_REPLAY_DEAD: &str = "UPDATE hookbox_outbox \
     SET dead_at = NULL, attempts = 0, \
     next_attempt_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER), \
     leased_until = NULL, lease_token = NULL WHERE dead_at IS NOT NULL";

/// Makes every dead message pending again; returns how many
/// ([`OutboxAdmin::replay_matching`] of a filter that selects them).
async fn replay_dead(store: &SqliteStore) -> Result<u64, SqliteError> {
    let mut conn = store.connection().await?;
    let replayed = diesel::sql_query(OUTBOX_REPLAY_DEAD)
        .execute(&mut *conn)
        .await?;
    Ok(replayed as u64)
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

    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
        boxed_any(list(self, filter, limit))
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
        match filter {
            // the filters whose messages include dead ones
            OutboxFilter::Dead | OutboxFilter::All => boxed_any(replay_dead(self)),
            // none of their messages is dead
            OutboxFilter::Pending | OutboxFilter::Sent => Box::pin(async { Ok(0) }),
        }
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(purge(self, now))
    }
}
