//! The inbox on PostgreSQL: [`receive`](Inbox::receive) (one autocommitted insert,
//! or through the group-commit writers) and [`work_batch`](Inbox::work_batch),
//! whose worker (`FOR UPDATE SKIP LOCKED`, a batch per transaction, each handler in
//! a savepoint) is in [`work`](crate::work); and [`InboxAdmin`], the operators'
//! reads, replays and counts, beside their SQL.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::spi::{ErasedHandler, RowOutcome, fill_minutes, minute_of};
use hookbox_core::{
    AnyStoreError, BatchLimits, BoxFuture, Inbox, InboxAdmin, InboxFilter, InboxOverview,
    InboxStats, MinuteCounts, ProviderCounts, Purge, Purged, Received, StoredDelivery,
    VerifiedDelivery,
};
use time::OffsetDateTime;

use crate::error::{PgError, boxed_any};
use crate::filter::{Cursor, inbox_condition};
use crate::rows::InboxRow;
use crate::schema::hookbox_inbox as inbox;
use crate::store::PgStore;
use crate::writer::{InboxInsert, received};

impl Inbox for PgStore {
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, PgError>> {
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
                // per-request: one autocommitted statement, durable (per
                // synchronous_commit) when it returns
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
        handler: &'a ErasedHandler<'a, AsyncPgConnection>,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, PgError>> {
        // the batch transaction, in `work`
        Box::pin(self.run_work_batch(handler, limits))
    }

    fn worker_concurrency(&self) -> u32 {
        self.inner.options.worker_concurrency()
    }
}

/// One row by id ([`InboxAdmin::get`]).
async fn get(store: &PgStore, id: i64) -> Result<Option<StoredDelivery>, PgError> {
    let row = store
        .with_connection(async |conn| {
            inbox::table
                .find(id)
                .select(InboxRow::as_select())
                .first(conn)
                .await
                .optional()
                .map_err(PgError::query)
        })
        .await?;
    row.map(InboxRow::into_delivery).transpose()
}

/// Up to `limit` rows `filter` selects, newest first ([`InboxAdmin::list`]).
async fn list(
    store: &PgStore,
    filter: InboxFilter,
    limit: u32,
) -> Result<Vec<StoredDelivery>, PgError> {
    let rows = store
        .with_connection(async |conn| {
            inbox::table
                .select(InboxRow::as_select())
                .filter(inbox_condition(conn, &filter, Cursor::Keep).await?)
                .order(inbox::id.desc())
                .limit(i64::from(limit))
                .load::<InboxRow>(conn)
                .await
                .map_err(PgError::query)
        })
        .await?;
    rows.into_iter().map(InboxRow::into_delivery).collect()
}

/// How many rows `filter` selects, its cursor ignored ([`InboxAdmin::count`]).
async fn count(store: &PgStore, filter: InboxFilter) -> Result<u64, PgError> {
    let counted: i64 = store
        .with_connection(async |conn| {
            inbox::table
                .filter(inbox_condition(conn, &filter, Cursor::Ignore).await?)
                .count()
                .get_result(conn)
                .await
                .map_err(PgError::query)
        })
        .await?;
    Ok(u64::try_from(counted).unwrap_or(0))
}

/// Makes one dead letter due now ([`InboxAdmin::replay`]).
async fn replay(store: &PgStore, id: i64) -> Result<bool, PgError> {
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
            .map_err(PgError::query)?;
            Ok(replayed == 1)
        })
        .await
}

/// Makes every dead letter `filter` selects due now; returns how many
/// ([`InboxAdmin::replay_matching`]).
async fn replay_matching(store: &PgStore, filter: InboxFilter) -> Result<u64, PgError> {
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
            .map_err(PgError::query)?;
            Ok(replayed as u64)
        })
        .await
}

/// Deletes every dead letter `filter` selects; returns how many
/// ([`InboxAdmin::purge_matching`]).
async fn purge_matching(store: &PgStore, filter: InboxFilter) -> Result<u64, PgError> {
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
            .map_err(PgError::query)?;
            Ok(deleted as u64)
        })
        .await
}

/// The counts per provider and per minute since `since` ([`InboxAdmin::overview`]).
async fn overview(store: &PgStore, since: OffsetDateTime) -> Result<InboxOverview, PgError> {
    let since = minute_of(since);
    let (providers, minutes) = store
        .with_connection(async |conn| {
            let providers = diesel::sql_query(
                "SELECT provider, \
                   count(*) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL) AS pending, \
                   count(*) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL \
                     AND attempts > 0) AS failed, \
                   count(*) FILTER (WHERE processed_at IS NOT NULL) AS processed, \
                   count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead, \
                   min(received_at) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL) \
                     AS oldest_pending \
                 FROM hookbox_inbox GROUP BY provider ORDER BY provider",
            )
            .load::<ProviderRow>(conn)
            .await
            .map_err(PgError::query)?;
            let minutes = diesel::sql_query(
                "SELECT minute, sum(received)::bigint AS received, \
                   sum(processed)::bigint AS processed FROM ( \
                   SELECT date_trunc('minute', received_at) AS minute, \
                     count(*) AS received, 0::bigint AS processed \
                   FROM hookbox_inbox WHERE received_at >= $1 GROUP BY 1 \
                   UNION ALL \
                   SELECT date_trunc('minute', processed_at), 0, count(*) \
                   FROM hookbox_inbox WHERE processed_at >= $1 GROUP BY 1 \
                 ) AS traffic GROUP BY minute ORDER BY minute",
            )
            .bind::<diesel::sql_types::Timestamptz, _>(since)
            .load::<MinuteRow>(conn)
            .await
            .map_err(PgError::query)?;
            Ok::<_, PgError>((providers, minutes))
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
async fn stats(store: &PgStore) -> Result<InboxStats, PgError> {
    store
        .with_connection(async |conn| {
            let row = diesel::sql_query(
                "SELECT \
                   count(*) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL) AS pending, \
                   count(*) FILTER (WHERE processed_at IS NOT NULL) AS processed, \
                   count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead, \
                   min(received_at) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL) \
                     AS oldest_pending \
                 FROM hookbox_inbox",
            )
            .get_result::<StatsRow>(conn)
            .await
            .map_err(PgError::query)?;
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
impl InboxAdmin for PgStore {
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
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
    oldest_pending: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct MinuteRow {
    #[diesel(sql_type = diesel::sql_types::Timestamptz)]
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
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
    oldest_pending: Option<OffsetDateTime>,
}

/// A replayed dead letter: due now with its attempts reset. `last_error` is kept for
/// the record until the next failure replaces it.
#[allow(clippy::type_complexity)]
fn replayed() -> (
    diesel::dsl::Eq<inbox::attempts, i32>,
    diesel::dsl::Eq<inbox::dead_at, Option<OffsetDateTime>>,
    diesel::dsl::Eq<inbox::next_attempt_at, diesel::dsl::now>,
) {
    (
        inbox::attempts.eq(0),
        inbox::dead_at.eq(None::<OffsetDateTime>),
        inbox::next_attempt_at.eq(diesel::dsl::now),
    )
}
