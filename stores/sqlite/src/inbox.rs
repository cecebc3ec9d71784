//! The inbox on SQLite: [`receive`](Inbox::receive) (a row inserted alone, or
//! through the group-commit writer) and [`work_batch`](Inbox::work_batch), whose
//! worker (a lease per batch instead of `SKIP LOCKED`) is in [`work`](crate::work);
//! and [`InboxAdmin`], the operators' reads, replays and counts, beside their SQL
//! (the overview's, which reads indexes and a range of ids, in [`overview`]).

use std::time::Instant;

use diesel::OptionalExtension as _;
use diesel::sql_types::{BigInt, Nullable};
use diesel::sqlite::SqliteConnection;
use diesel_async::RunQueryDsl as _;
use hookbox_core::spi::{ErasedHandler, RowOutcome};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, BatchLimits, BoxFuture, Inbox, InboxAdmin, InboxFilter, InboxOverview,
    InboxStats, Purge, Purged, Received, StoredDelivery, VerifiedDelivery,
};

use crate::connect::Conn;
use crate::error::{SqliteError, boxed_any};
use crate::filter::{Cursor, Where, inbox_where};
use crate::rows::{Count, InboxRow, from_micros, micros, now, select_inbox};
use crate::store::SqliteStore;
use crate::writer::{InboxInsert, received};

mod overview;

use overview::overview;

#[derive(diesel::QueryableByName)]
struct Stats {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    processed: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    oldest_pending: Option<i64>,
}

impl SqliteStore {
    /// Inserts one inbox row in autocommit on a pooled connection, as per-request
    /// commit does; with `synchronous = FULL` the row is on disk (WAL fsynced) when
    /// it returns. With [`Read::First`] a stored key is answered from a read
    /// instead, in the same trip to the blocking pool. The insert waits for the
    /// write lock in sub-millisecond steps, not SQLite's busy sleeps
    /// ([`InboxInsert::insert_waiting_for_lock`]).
    async fn insert_alone(&self, row: InboxInsert, read: Read) -> Result<Received, SqliteError> {
        let mut conn = self.connection().await?;
        let deadline = Instant::now() + self.inner.options.busy_timeout;
        let busy_timeout = self.inner.options.busy_timeout_pragma();
        let (outcome, restored) = conn
            .spawn_blocking(move |conn: &mut SqliteConnection| {
                if read == Read::First && row.is_stored_on(conn)? {
                    return Ok((Ok(Received::Duplicate), true));
                }
                let (inserted, restored) =
                    row.insert_waiting_for_lock(conn, deadline, &busy_timeout);
                Ok((inserted.map(received), restored))
            })
            .await?;
        if !restored {
            conn.discard();
        }
        outcome.map_err(SqliteError::from)
    }
}

/// Whether a lone receive reads its key before it inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Group commit: a duplicate never takes the write lock.
    First,
    /// Per-request commit: the insert alone, as it always was.
    No,
}

impl Inbox for SqliteStore {
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, SqliteError>> {
        Box::pin(async move {
            let key = delivery.dedupe_key();
            let row = InboxInsert {
                scope: key.scope(),
                provider: key.provider().to_string(),
                delivery_id: key.delivery_id().to_string(),
                tenant: key.tenant().map(str::to_string),
                event_type: delivery.event_type().map(str::to_string),
                correlation_id: delivery.correlation_id().map(str::to_string),
                signed_at: delivery.signed_at().map(micros),
                body: delivery.body().clone(),
                headers: delivery.headers().to_json(),
                now: now(),
            };
            let Some(writer) = &self.inner.writer else {
                return self.insert_alone(row, Read::No).await;
            };
            let in_flight = writer.enter();
            if in_flight.alone() {
                // a stored key is still answered from a read, without the write lock
                let outcome = self.insert_alone(row, Read::First).await;
                if matches!(outcome, Ok(Received::Stored)) {
                    writer.committed_alone();
                }
                return outcome;
            }
            // group commit: a copy already stored is answered from the lookup
            // thread's read, the rest are committed in batches (see `writer`)
            writer.write(row).await
        })
    }

    fn work_batch_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, Conn>,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, SqliteError>> {
        // the lease and work transactions, in `work`
        Box::pin(self.run_work_batch(handler, limits))
    }
}

/// One row. Binds: id.
const GET: &str = select_inbox!("WHERE id = ?");

/// One row by id ([`InboxAdmin::get`]).
async fn get(store: &SqliteStore, id: i64) -> Result<Option<StoredDelivery>, SqliteError> {
    let mut conn = store.connection().await?;
    let row = diesel::sql_query(GET)
        .bind::<BigInt, _>(id)
        .get_result::<InboxRow>(&mut *conn)
        .await
        .optional()?;
    row.map(InboxRow::into_delivery).transpose()
}

/// Up to `limit` rows `filter` selects, newest first ([`InboxAdmin::list`]); a row
/// that cannot be read back fails the whole list with `SqliteError::Corrupt`,
/// naming its id.
async fn list(
    store: &SqliteStore,
    filter: InboxFilter,
    limit: u32,
) -> Result<Vec<StoredDelivery>, SqliteError> {
    let clause = inbox_where(&filter, Cursor::Keep);
    let sql = list_sql(&clause);
    let query = clause.query(sql).bind::<BigInt, _>(i64::from(limit));
    let mut conn = store.connection().await?;
    let rows = query.load::<InboxRow>(&mut *conn).await?;
    rows.into_iter().map(InboxRow::into_delivery).collect()
}

/// `list`'s statement for `clause`. Binds: the clause's, then the limit.
fn list_sql(clause: &Where) -> String {
    format!(
        "{} {} ORDER BY id DESC LIMIT ?",
        select_inbox!(""),
        clause.sql()
    )
}

/// How many rows `filter` selects, its cursor ignored ([`InboxAdmin::count`]).
async fn count(store: &SqliteStore, filter: InboxFilter) -> Result<u64, SqliteError> {
    let clause = inbox_where(&filter, Cursor::Ignore);
    let sql = format!("SELECT COUNT(*) AS n FROM hookbox_inbox {}", clause.sql());
    let mut conn = store.connection().await?;
    let counted = clause.query(sql).get_result::<Count>(&mut *conn).await?;
    Ok(u64::try_from(counted.n).unwrap_or(0))
}

/// Makes one dead letter due again with its attempts reset; `last_error` stays, for
/// the record. Binds: next_attempt_at, id.
const REPLAY: &str = "UPDATE hookbox_inbox SET attempts = 0, dead_at = NULL, \
     next_attempt_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE id = ? AND dead_at IS NOT NULL";

/// Makes one dead letter due now ([`InboxAdmin::replay`]).
async fn replay(store: &SqliteStore, id: i64) -> Result<bool, SqliteError> {
    let mut conn = store.connection().await?;
    let replayed = diesel::sql_query(REPLAY)
        .bind::<BigInt, _>(now())
        .bind::<BigInt, _>(id)
        .execute(&mut *conn)
        .await?;
    Ok(replayed == 1)
}

/// Makes every dead letter `filter` selects due now (the database's clock), as
/// [`REPLAY`] does one; returns how many ([`InboxAdmin::replay_matching`]).
async fn replay_matching(store: &SqliteStore, filter: InboxFilter) -> Result<u64, SqliteError> {
    let clause = inbox_where(&filter, Cursor::Ignore);
    let sql = format!(
        "UPDATE hookbox_inbox SET attempts = 0, dead_at = NULL, \
           next_attempt_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER), \
           leased_until = NULL, lease_token = NULL \
         {} AND dead_at IS NOT NULL AND processed_at IS NULL",
        clause.sql()
    );
    let mut conn = store.connection().await?;
    let replayed = clause.query(sql).execute(&mut *conn).await?;
    Ok(replayed as u64)
}

/// Deletes every dead letter `filter` selects; returns how many
/// ([`InboxAdmin::purge_matching`]).
async fn purge_matching(store: &SqliteStore, filter: InboxFilter) -> Result<u64, SqliteError> {
    let clause = inbox_where(&filter, Cursor::Ignore);
    let sql = format!(
        "DELETE FROM hookbox_inbox {} AND dead_at IS NOT NULL AND processed_at IS NULL",
        clause.sql()
    );
    let mut conn = store.connection().await?;
    let deleted = clause.query(sql).execute(&mut *conn).await?;
    Ok(deleted as u64)
}

/// `InboxAdmin::stats` in one statement.
const STATS: &str = "SELECT \
     (SELECT COUNT(*) FROM hookbox_inbox \
      WHERE processed_at IS NULL AND dead_at IS NULL) AS pending, \
     (SELECT COUNT(*) FROM hookbox_inbox \
      WHERE processed_at IS NOT NULL AND dead_at IS NULL) AS processed, \
     (SELECT COUNT(*) FROM hookbox_inbox WHERE dead_at IS NOT NULL) AS dead, \
     (SELECT MIN(received_at) FROM hookbox_inbox \
      WHERE processed_at IS NULL AND dead_at IS NULL) AS oldest_pending";

/// The counts ([`InboxAdmin::stats`]), in one statement.
async fn stats(store: &SqliteStore) -> Result<InboxStats, SqliteError> {
    let mut conn = store.connection().await?;
    let stats = diesel::sql_query(STATS)
        .get_result::<Stats>(&mut *conn)
        .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(InboxStats {
        pending: count(stats.pending),
        processed: count(stats.processed),
        dead: count(stats.dead),
        oldest_pending: stats.oldest_pending.and_then(from_micros),
    })
}

/// The operator's verbs on the inbox, each on a pooled connection; `purge` is the
/// store's [`Purge`] (in its `purge` module).
impl InboxAdmin for SqliteStore {
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

#[cfg(test)]
mod tests {
    use diesel::Connection as _;
    use diesel::RunQueryDsl as _;
    use diesel::sql_types::Text;
    use diesel::sqlite::SqliteConnection;
    use hookbox_core::InboxFilter;

    use super::{Cursor, inbox_where, list_sql};

    #[derive(diesel::QueryableByName)]
    struct PlanLine {
        #[diesel(sql_type = Text)]
        detail: String,
    }

    /// A fresh schema; no `ANALYZE` ever ran on it, as on a deployment (the store
    /// never runs one), so the plans below are the ones a large table gets too.
    pub(super) fn schema() -> SqliteConnection {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        crate::blocking::migrate(&mut conn).unwrap();
        conn
    }

    /// The lines of `EXPLAIN QUERY PLAN` for `sql`, its placeholders unbound.
    pub(super) fn plan(conn: &mut SqliteConnection, sql: &str) -> Vec<String> {
        diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load::<PlanLine>(conn)
            .unwrap()
            .into_iter()
            .map(|line| line.detail)
            .collect()
    }

    pub(super) fn reads_whole_table(plan: &[String]) -> bool {
        plan.iter().any(|line| line == "SCAN hookbox_inbox")
    }

    #[test]
    fn a_delivery_id_alone_is_looked_up_in_the_unique_key() {
        let mut conn = schema();
        for filter in [
            InboxFilter::all().with_delivery_id("evt_1"),
            InboxFilter::all()
                .with_source("shop")
                .with_delivery_id("evt_1"),
            InboxFilter::all()
                .with_provider("stripe")
                .with_delivery_id("evt_1")
                .with_before_id(10),
            InboxFilter::all()
                .with_event_type("charge.succeeded")
                .with_delivery_id("evt_1"),
        ] {
            let sql = list_sql(&inbox_where(&filter, Cursor::Keep));
            let plan = plan(&mut conn, &sql);
            assert!(!reads_whole_table(&plan), "{filter:?}: {plan:#?}");
            assert!(
                plan.iter().any(|line| line.starts_with(
                    "SEARCH hookbox_inbox USING INDEX sqlite_autoindex_hookbox_inbox_1 \
                     (source=? AND provider=? AND delivery_id=?"
                )),
                "{filter:?}: {plan:#?}"
            );
        }
    }
}
