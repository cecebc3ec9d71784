//! The outbox's operator verbs on MySQL and MariaDB, [`OutboxAdmin`] for [`MysqlStore`]: one
//! message by id, the filtered lists and counts, a replay of one message or of the
//! dead ones a filter selects, the counts per state and per sink, and the purge of sent messages (its deletes in
//! [`purge`](crate::purge)), with their queries.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::RunQueryDsl;
use hookbox_core::{
    AnyStoreError, BoxFuture, MessageId, OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStats,
    SinkCounts,
};
use time::OffsetDateTime;

use super::row::{OutboxRow, row_columns};
use crate::error::{MysqlError, boxed_any};
use crate::filter::{Cursor, bind_outbox, outbox_where};
use crate::purge::purge_sent;
use crate::store::MysqlStore;

/// A message an operator replays (asks to send again): neither sent nor dead, due
/// now, its attempts reset and any lease dropped (so the holder of an old lease
/// cannot settle it). `last_error` is kept for the record until the next failure
/// replaces it.
macro_rules! replayed {
    () => {
        "UPDATE hookbox_outbox m SET sent_at = NULL, dead_at = NULL, attempts = 0, \
           next_attempt_at = UTC_TIMESTAMP(6), leased_until = NULL, lease_token = NULL "
    };
}

/// Replays one sent or dead message by id.
const REPLAY: &str = concat!(
    replayed!(),
    "WHERE message_id = ? AND (sent_at IS NOT NULL OR dead_at IS NOT NULL)"
);

/// One message by id.
const ONE: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM hookbox_outbox m WHERE m.message_id = ?"
);

/// One message by id, `None` when there is none ([`OutboxAdmin::get`]).
async fn get(store: &MysqlStore, id: &MessageId) -> Result<Option<OutboxMessage>, MysqlError> {
    let row = store
        .with_connection(async |conn| {
            diesel::sql_query(ONE)
                .bind::<Text, _>(id.as_str())
                .get_result::<OutboxRow>(conn)
                .await
                .optional()
                .map_err(MysqlError::query)
        })
        .await?;
    row.map(OutboxRow::into_message).transpose()
}

/// Up to `limit` messages `filter` selects, newest first ([`OutboxAdmin::list`]).
async fn list(
    store: &MysqlStore,
    filter: OutboxFilter,
    limit: u32,
) -> Result<Vec<OutboxMessage>, MysqlError> {
    let (conditions, binds) = outbox_where(&filter, Cursor::Keep);
    let sql = format!(
        "SELECT {} FROM hookbox_outbox m {conditions} ORDER BY m.seq DESC LIMIT ?",
        row_columns!()
    );
    let query =
        bind_outbox(diesel::sql_query(sql).into_boxed(), binds).bind::<BigInt, _>(i64::from(limit));
    let rows = store
        .with_connection(async |conn| {
            query
                .load::<OutboxRow>(conn)
                .await
                .map_err(MysqlError::query)
        })
        .await?;
    rows.into_iter().map(OutboxRow::into_message).collect()
}

/// How many messages `filter` selects, its cursor ignored ([`OutboxAdmin::count`]).
async fn count(store: &MysqlStore, filter: OutboxFilter) -> Result<u64, MysqlError> {
    let (conditions, binds) = outbox_where(&filter, Cursor::Ignore);
    let sql = format!("SELECT count(*) AS n FROM hookbox_outbox m {conditions}");
    let query = bind_outbox(diesel::sql_query(sql).into_boxed(), binds);
    let counted = store
        .with_connection(async |conn| {
            query
                .get_result::<CountRow>(conn)
                .await
                .map_err(MysqlError::query)
        })
        .await?;
    Ok(u64::try_from(counted.n).unwrap_or(0))
}

/// The row of [`count`]'s query.
#[derive(QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Makes one sent or dead message pending again; `false` when there is no such
/// message ([`OutboxAdmin::replay`]).
async fn replay(store: &MysqlStore, id: &MessageId) -> Result<bool, MysqlError> {
    store
        .with_connection(async move |conn| {
            let replayed = diesel::sql_query(REPLAY)
                .bind::<Text, _>(id.as_str())
                .execute(conn)
                .await
                .map_err(MysqlError::query)?;
            Ok(replayed == 1)
        })
        .await
}

/// Makes every dead message `filter` selects pending again; returns how many
/// ([`OutboxAdmin::replay_matching`]).
async fn replay_matching(store: &MysqlStore, filter: OutboxFilter) -> Result<u64, MysqlError> {
    let (conditions, binds) = outbox_where(&filter, Cursor::Ignore);
    let sql = format!("{} {conditions} AND m.dead_at IS NOT NULL", replayed!());
    let query = bind_outbox(diesel::sql_query(sql).into_boxed(), binds);
    store
        .with_connection(async |conn| {
            let replayed = query.execute(conn).await.map_err(MysqlError::query)?;
            Ok(replayed as u64)
        })
        .await
}

/// The counts per sink ([`OutboxAdmin::sinks`]), in one statement.
async fn sinks(store: &MysqlStore) -> Result<Vec<SinkCounts>, MysqlError> {
    let rows = store
        .with_connection(async |conn| {
            // MySQL has no `FILTER`: `count` of a `CASE` counts its non-NULLs
            diesel::sql_query(
                "SELECT sink, \
                   count(CASE WHEN sent_at IS NULL AND dead_at IS NULL THEN 1 END) AS pending, \
                   count(sent_at) AS sent, \
                   count(dead_at) AS dead, \
                   min(CASE WHEN sent_at IS NULL AND dead_at IS NULL THEN staged_at END) \
                     AS oldest_pending \
                 FROM hookbox_outbox GROUP BY sink ORDER BY sink",
            )
            .load::<SinkRow>(conn)
            .await
            .map_err(MysqlError::query)
        })
        .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(rows
        .into_iter()
        .map(|row| SinkCounts {
            sink: row.sink,
            pending: count(row.pending),
            sent: count(row.sent),
            dead: count(row.dead),
            oldest_pending: row.oldest_pending,
        })
        .collect())
}

/// The row of [`sinks`]'s query.
#[derive(QueryableByName)]
struct SinkRow {
    #[diesel(sql_type = Text)]
    sink: String,
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    sent: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<Datetime>)]
    oldest_pending: Option<OffsetDateTime>,
}

/// The counts of pending, sent and dead messages and the oldest pending one's
/// staging time ([`OutboxAdmin::stats`]), in one statement.
async fn stats(store: &MysqlStore) -> Result<OutboxStats, MysqlError> {
    store
        .with_connection(async |conn| {
            let row = diesel::sql_query(
                "SELECT \
                   count(CASE WHEN sent_at IS NULL AND dead_at IS NULL THEN 1 END) AS pending, \
                   count(sent_at) AS sent, \
                   count(dead_at) AS dead, \
                   min(CASE WHEN sent_at IS NULL AND dead_at IS NULL THEN staged_at END) \
                     AS oldest_pending \
                 FROM hookbox_outbox",
            )
            .get_result::<StatsRow>(conn)
            .await
            .map_err(MysqlError::query)?;
            Ok(OutboxStats {
                pending: row.pending.try_into().unwrap_or(0),
                sent: row.sent.try_into().unwrap_or(0),
                dead: row.dead.try_into().unwrap_or(0),
                oldest_pending: row.oldest_pending,
            })
        })
        .await
}

/// The row of [`stats`]'s query.
#[derive(QueryableByName)]
struct StatsRow {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    sent: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<Datetime>)]
    oldest_pending: Option<OffsetDateTime>,
}

/// Deletes sent messages past their retention ([`OutboxAdmin::purge`]).
async fn purge(store: &MysqlStore, now: OffsetDateTime) -> Result<u64, MysqlError> {
    store
        .with_connection(async move |conn| {
            purge_sent(conn, store.inner.options.retention(), now).await
        })
        .await
}

impl OutboxAdmin for MysqlStore {
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
