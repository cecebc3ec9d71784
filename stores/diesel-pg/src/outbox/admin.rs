//! The outbox's operator queries: one message by id, the lists by state, a retry
//! of one message or of every dead letter, and the counts. The admin methods of
//! [`OutboxStore`](hookbox_core::OutboxStore) for [`PgStore`] (in `outbox`) call
//! these.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;
use hookbox_core::{MessageId, OutboxFilter, OutboxMessage, OutboxStats};
use time::OffsetDateTime;

use super::row::{OutboxRow, row_columns};
use crate::error::PgError;
use crate::store::PgStore;

/// A message an operator asked to send again: neither sent nor dead, due now, its
/// attempts reset and any lease dropped (so the holder of an old lease cannot settle
/// it). `last_error` is kept for the record until the next failure replaces it.
macro_rules! retried {
    () => {
        "UPDATE hookbox_outbox SET sent_at = NULL, dead_at = NULL, attempts = 0, \
           next_attempt_at = now(), leased_until = NULL, lease_token = NULL "
    };
}

/// Retries one sent or dead message by id (`$1`).
const RETRY_ONE: &str = concat!(
    retried!(),
    "WHERE message_id = $1 AND (sent_at IS NOT NULL OR dead_at IS NOT NULL)"
);

/// Retries every dead letter.
const RETRY_DEAD: &str = concat!(retried!(), "WHERE dead_at IS NOT NULL");

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

/// One message by id, `None` when there is none
/// ([`OutboxStore::message`](hookbox_core::OutboxStore::message)).
pub(super) async fn message(
    store: &PgStore,
    id: &MessageId,
) -> Result<Option<OutboxMessage>, PgError> {
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

/// Up to `limit` messages in `filter`'s state and order
/// ([`OutboxStore::messages`](hookbox_core::OutboxStore::messages)).
pub(super) async fn messages(
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
/// message ([`OutboxStore::retry_message`](hookbox_core::OutboxStore::retry_message)).
pub(super) async fn retry_message(store: &PgStore, id: &MessageId) -> Result<bool, PgError> {
    store
        .with_connection(async move |conn| {
            let retried = diesel::sql_query(RETRY_ONE)
                .bind::<Text, _>(id.as_str())
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(retried == 1)
        })
        .await
}

/// Makes every dead letter pending again; returns how many
/// ([`OutboxStore::retry_dead_messages`](hookbox_core::OutboxStore::retry_dead_messages)).
pub(super) async fn retry_dead_messages(store: &PgStore) -> Result<u64, PgError> {
    store
        .with_connection(async |conn| {
            let retried = diesel::sql_query(RETRY_DEAD)
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(retried as u64)
        })
        .await
}

/// The counts of pending, sent and dead messages and the oldest pending one's
/// staging time ([`OutboxStore::outbox_stats`](hookbox_core::OutboxStore::outbox_stats)).
pub(super) async fn outbox_stats(store: &PgStore) -> Result<OutboxStats, PgError> {
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

/// The row of [`outbox_stats`]'s query.
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
