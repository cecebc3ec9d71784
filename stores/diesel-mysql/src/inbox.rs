//! The inbox on MySQL and MariaDB: [`receive`](Inbox::receive) (a read and one
//! autocommitted insert, or through the group-commit writers) and
//! [`work_batch`](Inbox::work_batch), whose worker (`FOR UPDATE SKIP LOCKED`, a batch
//! per transaction, each handler in a savepoint) is in [`work`](crate::work); and
//! [`InboxAdmin`], the operators' reads, replays and counts, beside their SQL.

use diesel::prelude::*;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use hookbox_core::spi::{ErasedHandler, RowOutcome, fill_minutes, minute_of};
use hookbox_core::{
    AnyStoreError, BatchLimits, BoxFuture, Inbox, InboxAdmin, InboxFilter, InboxOverview,
    InboxStats, MinuteCounts, ProviderCounts, Purge, Purged, Received, StoredDelivery,
    VerifiedDelivery,
};
use time::OffsetDateTime;

use crate::claims::{UtcNow, utc_now};
use crate::error::{MysqlError, boxed_any};
use crate::filter::{Cursor, inbox_condition};
use crate::rows::InboxRow;
use crate::schema::hookbox_inbox as inbox;
use crate::store::MysqlStore;
use crate::writer::{InboxInsert, received};

impl Inbox for MysqlStore {
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, MysqlError>> {
        let key = delivery.dedupe_key();
        let row = InboxInsert {
            source: key.scope(),
            provider: key.provider().to_string(),
            delivery_id: key.delivery_id().to_string(),
            tenant: key.tenant().map(str::to_string),
            event_type: delivery.event_type().map(str::to_string),
            correlation_id: delivery.correlation_id().map(str::to_string),
            signed_at: delivery.signed_at(),
            body: delivery.body().clone(),
            headers: delivery.headers().to_json(),
        };
        Box::pin(async move {
            let Some(writer) = &self.inner.writer else {
                // per-request: a read (a copy already stored is answered without a
                // lock, even while a worker holds its row) and one autocommitted
                // insert, durable (per innodb_flush_log_at_trx_commit) when it returns
                let inserted = self
                    .with_connection(async |conn| row.insert_on(conn).await)
                    .await?;
                return Ok(received(inserted));
            };
            // group commit: a copy already stored is answered by the lookup task's
            // read, the rest are written in batches (see `writer`)
            writer.write(row).await
        })
    }

    fn work_batch_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, AsyncMysqlConnection>,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, MysqlError>> {
        // the batch transaction, in `work`
        Box::pin(self.run_work_batch(handler, limits))
    }

    fn worker_concurrency(&self) -> u32 {
        self.inner.options.worker_concurrency()
    }
}

/// One row by id ([`InboxAdmin::get`]).
async fn get(store: &MysqlStore, id: i64) -> Result<Option<StoredDelivery>, MysqlError> {
    let row = store
        .with_connection(async |conn| {
            inbox::table
                .find(id)
                .select(InboxRow::as_select())
                .first(conn)
                .await
                .optional()
                .map_err(MysqlError::query)
        })
        .await?;
    row.map(InboxRow::into_delivery).transpose()
}

/// Up to `limit` rows `filter` selects, newest first ([`InboxAdmin::list`]).
async fn list(
    store: &MysqlStore,
    filter: InboxFilter,
    limit: u32,
) -> Result<Vec<StoredDelivery>, MysqlError> {
    let rows = store
        .with_connection(async |conn| {
            inbox::table
                .select(InboxRow::as_select())
                .filter(inbox_condition(conn, &filter, Cursor::Keep).await?)
                .order(inbox::id.desc())
                .limit(i64::from(limit))
                .load::<InboxRow>(conn)
                .await
                .map_err(MysqlError::query)
        })
        .await?;
    rows.into_iter().map(InboxRow::into_delivery).collect()
}

/// How many rows `filter` selects, its cursor ignored ([`InboxAdmin::count`]).
async fn count(store: &MysqlStore, filter: InboxFilter) -> Result<u64, MysqlError> {
    let counted: i64 = store
        .with_connection(async |conn| {
            inbox::table
                .filter(inbox_condition(conn, &filter, Cursor::Ignore).await?)
                .count()
                .get_result(conn)
                .await
                .map_err(MysqlError::query)
        })
        .await?;
    Ok(u64::try_from(counted).unwrap_or(0))
}

/// Makes one dead letter due now ([`InboxAdmin::replay`]).
async fn replay(store: &MysqlStore, id: i64) -> Result<bool, MysqlError> {
    store
        .with_connection(async move |conn| {
            let replayed = diesel::update(
                inbox::table
                    .find(id)
                    .filter(inbox::dead_at.is_not_null())
                    .filter(inbox::processed_at.is_null()),
            )
            .set(replayed())
            .execute(conn)
            .await
            .map_err(MysqlError::query)?;
            Ok(replayed == 1)
        })
        .await
}

/// Makes every dead letter `filter` selects due now; returns how many
/// ([`InboxAdmin::replay_matching`]).
async fn replay_matching(store: &MysqlStore, filter: InboxFilter) -> Result<u64, MysqlError> {
    store
        .with_connection(async |conn| {
            let replayed = diesel::update(
                inbox::table
                    .filter(inbox_condition(conn, &filter, Cursor::Ignore).await?)
                    .filter(inbox::dead_at.is_not_null())
                    .filter(inbox::processed_at.is_null()),
            )
            .set(replayed())
            .execute(conn)
            .await
            .map_err(MysqlError::query)?;
            Ok(replayed as u64)
        })
        .await
}

/// Deletes every dead letter `filter` selects; returns how many
/// ([`InboxAdmin::purge_matching`]).
async fn purge_matching(store: &MysqlStore, filter: InboxFilter) -> Result<u64, MysqlError> {
    store
        .with_connection(async |conn| {
            let deleted = diesel::delete(
                inbox::table
                    .filter(inbox_condition(conn, &filter, Cursor::Ignore).await?)
                    .filter(inbox::dead_at.is_not_null())
                    .filter(inbox::processed_at.is_null()),
            )
            .execute(conn)
            .await
            .map_err(MysqlError::query)?;
            Ok(deleted as u64)
        })
        .await
}

/// The counts per provider and per minute since `since` ([`InboxAdmin::overview`]).
async fn overview(store: &MysqlStore, since: OffsetDateTime) -> Result<InboxOverview, MysqlError> {
    let since = minute_of(since);
    let (providers, minutes) = store
        .with_connection(async |conn| {
            // MySQL has no `FILTER`: `count` of a `CASE` counts its non-NULLs
            let providers = diesel::sql_query(
                "SELECT provider, \
                   count(CASE WHEN processed_at IS NULL AND dead_at IS NULL THEN 1 END) \
                     AS pending, \
                   count(CASE WHEN processed_at IS NULL AND dead_at IS NULL \
                     AND attempts > 0 THEN 1 END) AS failed, \
                   count(processed_at) AS processed, \
                   count(dead_at) AS dead, \
                   min(CASE WHEN processed_at IS NULL AND dead_at IS NULL \
                     THEN received_at END) AS oldest_pending \
                 FROM hookbox_inbox GROUP BY provider ORDER BY provider",
            )
            .load::<ProviderRow>(conn)
            .await
            .map_err(MysqlError::query)?;
            let minutes = diesel::sql_query(
                "SELECT minute, CAST(sum(received) AS SIGNED) AS received, \
                   CAST(sum(processed) AS SIGNED) AS processed FROM ( \
                   SELECT CAST(DATE_FORMAT(received_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)) \
                       AS minute, count(*) AS received, 0 AS processed \
                   FROM hookbox_inbox WHERE received_at >= ? GROUP BY 1 \
                   UNION ALL \
                   SELECT CAST(DATE_FORMAT(processed_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)), \
                       0, count(*) \
                   FROM hookbox_inbox WHERE processed_at >= ? GROUP BY 1 \
                 ) AS traffic GROUP BY minute ORDER BY minute",
            )
            .bind::<diesel::sql_types::Datetime, _>(since)
            .bind::<diesel::sql_types::Datetime, _>(since)
            .load::<MinuteRow>(conn)
            .await
            .map_err(MysqlError::query)?;
            Ok::<_, MysqlError>((providers, minutes))
        })
        .await?;
    let now = OffsetDateTime::now_utc();
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let seen: Vec<MinuteCounts> = minutes
        .into_iter()
        .map(|m| MinuteCounts {
            minute: m.minute,
            received: count(m.received),
            processed: count(m.processed),
        })
        .collect();
    Ok(InboxOverview {
        providers: providers
            .into_iter()
            .map(|p| ProviderCounts {
                provider: p.provider,
                pending: count(p.pending),
                failed: count(p.failed),
                processed: count(p.processed),
                dead: count(p.dead),
                oldest_pending: p.oldest_pending,
            })
            .collect(),
        minutes: fill_minutes(since, now.max(since), &seen),
    })
}

/// The counts ([`InboxAdmin::stats`]), in one statement.
async fn stats(store: &MysqlStore) -> Result<InboxStats, MysqlError> {
    store
        .with_connection(async |conn| {
            let row = diesel::sql_query(
                "SELECT \
                   count(CASE WHEN processed_at IS NULL AND dead_at IS NULL THEN 1 END) \
                     AS pending, \
                   count(processed_at) AS processed, \
                   count(dead_at) AS dead, \
                   min(CASE WHEN processed_at IS NULL AND dead_at IS NULL \
                     THEN received_at END) AS oldest_pending \
                 FROM hookbox_inbox",
            )
            .get_result::<StatsRow>(conn)
            .await
            .map_err(MysqlError::query)?;
            Ok(InboxStats {
                pending: row.pending.try_into().unwrap_or(0),
                processed: row.processed.try_into().unwrap_or(0),
                dead: row.dead.try_into().unwrap_or(0),
                oldest_pending: row.oldest_pending,
            })
        })
        .await
}

/// The operator's verbs on the inbox, each on a pooled connection; `purge` is the
/// store's [`Purge`] (in its `purge` module).
impl InboxAdmin for MysqlStore {
    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, AnyStoreError>> {
        boxed_any(stats(self))
    }

    fn overview(
        &self,
        since: OffsetDateTime,
    ) -> BoxFuture<'_, Result<InboxOverview, AnyStoreError>> {
        boxed_any(overview(self, since))
    }

    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>> {
        boxed_any(list(self, filter, limit))
    }

    fn count(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(count(self, filter))
    }

    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>> {
        boxed_any(get(self, id))
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>> {
        boxed_any(replay(self, id))
    }

    fn replay_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(replay_matching(self, filter))
    }

    fn purge_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        boxed_any(purge_matching(self, filter))
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>> {
        boxed_any(Purge::purge(self, now))
    }
}

#[derive(QueryableByName)]
struct ProviderRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    provider: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pending: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    failed: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    processed: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    dead: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Datetime>)]
    oldest_pending: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct MinuteRow {
    #[diesel(sql_type = diesel::sql_types::Datetime)]
    minute: OffsetDateTime,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    received: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    processed: i64,
}

#[derive(QueryableByName)]
struct StatsRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pending: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    processed: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    dead: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Datetime>)]
    oldest_pending: Option<OffsetDateTime>,
}

/// A replayed dead letter: due now with its attempts reset. `last_error` is kept for
/// the record until the next failure replaces it.
#[allow(clippy::type_complexity)]
fn replayed() -> (
    diesel::dsl::Eq<inbox::attempts, i32>,
    diesel::dsl::Eq<inbox::dead_at, Option<OffsetDateTime>>,
    diesel::dsl::Eq<inbox::next_attempt_at, UtcNow>,
) {
    (
        inbox::attempts.eq(0),
        inbox::dead_at.eq(None::<OffsetDateTime>),
        inbox::next_attempt_at.eq(utc_now()),
    )
}
