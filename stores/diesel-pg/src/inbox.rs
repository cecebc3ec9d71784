//! The inbox on PostgreSQL: [`receive`](Inbox::receive) (one autocommitted insert,
//! or through the group-commit writers) and [`work_batch`](Inbox::work_batch),
//! whose worker (`FOR UPDATE SKIP LOCKED`, a batch per transaction, each handler in
//! a savepoint) is in [`work`](crate::work); and [`InboxAdmin`], the operators'
//! reads, replays and counts, beside their SQL.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::spi::{ErasedHandler, RowOutcome};
use hookbox_core::{
    AnyStoreError, BatchLimits, BoxFuture, Inbox, InboxAdmin, InboxFilter, InboxStats, Purge,
    Purged, Received, StoredDelivery, VerifiedDelivery,
};
use time::OffsetDateTime;

use crate::error::{PgError, boxed_any};
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

/// Up to `limit` rows in `filter`'s order ([`InboxAdmin::list`]).
async fn list(
    store: &PgStore,
    filter: InboxFilter,
    limit: u32,
) -> Result<Vec<StoredDelivery>, PgError> {
    let query = inbox::table.select(InboxRow::as_select()).into_boxed();
    let query = match filter {
        InboxFilter::Pending => query
            .filter(inbox::processed_at.is_null())
            .filter(inbox::dead_at.is_null())
            .order((inbox::next_attempt_at.asc(), inbox::id.asc())),
        InboxFilter::Processed => query
            .filter(inbox::processed_at.is_not_null())
            .order((inbox::processed_at.desc(), inbox::id.desc())),
        InboxFilter::Dead => query
            .filter(inbox::dead_at.is_not_null())
            .order((inbox::dead_at.asc(), inbox::id.asc())),
        InboxFilter::All => query.order(inbox::id.desc()),
    };
    let rows = store
        .with_connection(async |conn| {
            query
                .limit(i64::from(limit))
                .load::<InboxRow>(conn)
                .await
                .map_err(PgError::query)
        })
        .await?;
    rows.into_iter().map(InboxRow::into_delivery).collect()
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

/// Makes every dead letter due now; returns how many
/// ([`InboxAdmin::replay_matching`] of a filter that selects them).
async fn replay_dead(store: &PgStore) -> Result<u64, PgError> {
    store
        .with_connection(async |conn| {
            let replayed = diesel::update(
                inbox::table
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

    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, AnyStoreError>> {
        boxed_any(list(self, filter, limit))
    }

    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, AnyStoreError>> {
        boxed_any(get(self, id))
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, AnyStoreError>> {
        boxed_any(replay(self, id))
    }

    fn replay_matching(&self, filter: InboxFilter) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        match filter {
            // the filters whose rows include dead letters
            InboxFilter::Dead | InboxFilter::All => boxed_any(replay_dead(self)),
            // none of their rows is a dead letter
            InboxFilter::Pending | InboxFilter::Processed => Box::pin(async { Ok(0) }),
        }
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, AnyStoreError>> {
        boxed_any(Purge::purge(self, now))
    }
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
