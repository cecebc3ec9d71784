//! The outbox's operator verbs on PostgreSQL, [`OutboxAdmin`] for [`PgStore`]: one
//! message by id, the lists by state, a replay of one message or of the dead ones,
//! the counts, and the purge of sent messages (its deletes in
//! [`purge`](crate::purge)), with their queries.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;
use hookbox_core::{
    AnyStoreError, BoxFuture, MessageId, OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStats,
};
use time::OffsetDateTime;

use super::row::{OutboxRow, row_columns};
use crate::error::{PgError, boxed_any};
use crate::purge::purge_sent;
use crate::store::PgStore;

/// A message an operator replays (asks to send again): neither sent nor dead, due
/// now, its attempts reset and any lease dropped (so the holder of an old lease
/// cannot settle it). `last_error` is kept for the record until the next failure
/// replaces it.
macro_rules! replayed {
    () => {
        "UPDATE hookbox_outbox SET sent_at = NULL, dead_at = NULL, attempts = 0, \
           next_attempt_at = now(), leased_until = NULL, lease_token = NULL "
    };
}

/// Replays one sent or dead message by id (`$1`).
const REPLAY: &str = concat!(
    replayed!(),
    "WHERE message_id = $1 AND (sent_at IS NOT NULL OR dead_at IS NOT NULL)"
);

/// Replays every dead letter.
const REPLAY_DEAD: &str = concat!(replayed!(), "WHERE dead_at IS NOT NULL");

/// One message by id (`$1`).
const ONE: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM hookbox_outbox m WHERE m.message_id = $1"
);

/// The operator's lists, in each filter's order, up to `$1` rows.
const LIST_PENDING: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM hookbox_outbox m WHERE m.sent_at IS NULL AND m.dead_at IS NULL \
      ORDER BY m.seq ASC LIMIT $1"
);
const LIST_SENT: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM hookbox_outbox m WHERE m.sent_at IS NOT NULL \
      ORDER BY m.sent_at DESC, m.seq DESC LIMIT $1"
);
const LIST_DEAD: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM hookbox_outbox m WHERE m.dead_at IS NOT NULL \
      ORDER BY m.dead_at ASC, m.seq ASC LIMIT $1"
);
const LIST_ALL: &str = concat!(
    "SELECT ",
    row_columns!(),
    " FROM hookbox_outbox m ORDER BY m.seq DESC LIMIT $1"
);

/// One message by id, `None` when there is none ([`OutboxAdmin::get`]).
async fn get(store: &PgStore, id: &MessageId) -> Result<Option<OutboxMessage>, PgError> {
    let row = store
        .with_connection(async |conn| {
            diesel::sql_query(ONE)
                .bind::<Text, _>(id.as_str())
                .get_result::<OutboxRow>(conn)
                .await
                .optional()
                .map_err(PgError::query)
        })
        .await?;
    row.map(OutboxRow::into_message).transpose()
}

/// Up to `limit` messages in `filter`'s state and order ([`OutboxAdmin::list`]).
async fn list(
    store: &PgStore,
    filter: OutboxFilter,
    limit: u32,
) -> Result<Vec<OutboxMessage>, PgError> {
    let sql = match filter {
        OutboxFilter::Pending => LIST_PENDING,
        OutboxFilter::Sent => LIST_SENT,
        OutboxFilter::Dead => LIST_DEAD,
        OutboxFilter::All => LIST_ALL,
    };
    let rows = store
        .with_connection(async |conn| {
            diesel::sql_query(sql)
                .bind::<BigInt, _>(i64::from(limit))
                .load::<OutboxRow>(conn)
                .await
                .map_err(PgError::query)
        })
        .await?;
    rows.into_iter().map(OutboxRow::into_message).collect()
}

/// Makes one sent or dead message pending again; `false` when there is no such
/// message ([`OutboxAdmin::replay`]).
async fn replay(store: &PgStore, id: &MessageId) -> Result<bool, PgError> {
    store
        .with_connection(async move |conn| {
            let replayed = diesel::sql_query(REPLAY)
                .bind::<Text, _>(id.as_str())
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(replayed == 1)
        })
        .await
}

/// Makes every dead letter pending again; returns how many
/// ([`OutboxAdmin::replay_matching`] of a filter that selects them).
async fn replay_dead(store: &PgStore) -> Result<u64, PgError> {
    store
        .with_connection(async |conn| {
            let replayed = diesel::sql_query(REPLAY_DEAD)
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(replayed as u64)
        })
        .await
}

/// The counts of pending, sent and dead messages and the oldest pending one's
/// staging time ([`OutboxAdmin::stats`]), in one statement.
async fn stats(store: &PgStore) -> Result<OutboxStats, PgError> {
    store
        .with_connection(async |conn| {
            let row = diesel::sql_query(
                "SELECT \
                   count(*) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL) AS pending, \
                   count(*) FILTER (WHERE sent_at IS NOT NULL) AS sent, \
                   count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead, \
                   min(staged_at) FILTER (WHERE sent_at IS NULL AND dead_at IS NULL) \
                     AS oldest_pending \
                 FROM hookbox_outbox",
            )
            .get_result::<StatsRow>(conn)
            .await
            .map_err(PgError::query)?;
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
    #[diesel(sql_type = Nullable<Timestamptz>)]
    oldest_pending: Option<OffsetDateTime>,
}

/// Deletes sent messages past their retention ([`OutboxAdmin::purge`]).
async fn purge(store: &PgStore, now: OffsetDateTime) -> Result<u64, PgError> {
    store
        .with_connection(async move |conn| {
            purge_sent(conn, store.inner.options.retention(), now).await
        })
        .await
}

impl OutboxAdmin for PgStore {
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
