//! The inbox on SQLite: [`receive`](Inbox::receive) (a row inserted alone, or
//! through the group-commit writer) and [`work_batch`](Inbox::work_batch), whose
//! worker (a lease per batch instead of `SKIP LOCKED`) is in [`work`](crate::work);
//! and [`InboxAdmin`], the operators' reads, replays and counts, beside their SQL.

use std::collections::BTreeMap;
use std::time::Instant;

use diesel::OptionalExtension as _;
use diesel::sql_query;
use diesel::sql_types::{BigInt, Nullable};
use diesel::sqlite::SqliteConnection;
use diesel_async::RunQueryDsl as _;
use hookbox_core::spi::{ErasedHandler, RowOutcome, fill_minutes, minute_of};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, BatchLimits, BoxFuture, Inbox, InboxAdmin, InboxFilter, InboxOverview,
    InboxStats, MinuteCounts, ProviderCounts, Purge, Purged, Received, StoredDelivery,
    VerifiedDelivery,
};

use crate::connect::Conn;
use crate::error::{SqliteError, boxed_any};
use crate::filter::{Cursor, Where, inbox_where};
use crate::rows::{Count, InboxRow, from_micros, micros, now, select_inbox};
use crate::store::SqliteStore;
use crate::writer::{InboxInsert, received};

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

/// `InboxAdmin::overview`'s pending rows per provider, read through the due index
/// `hookbox_inbox_due` (a pending row is in it, and only a pending row), so the
/// cost is the backlog's size, not the table's.
const PENDING_PER_PROVIDER: &str = "SELECT provider, COUNT(*) AS n, \
     SUM(attempts > 0) AS failed, MIN(received_at) AS oldest \
     FROM hookbox_inbox WHERE processed_at IS NULL AND dead_at IS NULL GROUP BY provider";

/// `InboxAdmin::overview`'s processed rows per provider, read through the partial
/// index `hookbox_inbox_processed` (provider first, so grouped as it is read).
const PROCESSED_PER_PROVIDER: &str = "SELECT provider, COUNT(*) AS n, 0 AS failed, \
     NULL AS oldest FROM hookbox_inbox \
     WHERE processed_at IS NOT NULL AND dead_at IS NULL GROUP BY provider";

/// `InboxAdmin::overview`'s dead letters per provider, read through the partial
/// index `hookbox_inbox_dead_by_provider`.
const DEAD_PER_PROVIDER: &str = "SELECT provider, COUNT(*) AS n, 0 AS failed, \
     NULL AS oldest FROM hookbox_inbox WHERE dead_at IS NOT NULL GROUP BY provider";

/// The highest row id (0 for an empty inbox).
const MAX_ID: &str = "SELECT COALESCE(MAX(id), 0) AS n FROM hookbox_inbox";

/// The first row at or after an id and before another, by the primary key.
/// Binds: from, to.
const PROBE: &str = "SELECT id, received_at FROM hookbox_inbox \
     WHERE id >= ? AND id < ? ORDER BY id LIMIT 1";

/// `InboxAdmin::overview`'s rows received and processed per minute (unix
/// microseconds divided into minutes), among the rows after an id: a range of the
/// primary key, not a scan of the table. Binds: after, since, after, since.
const PER_MINUTE: &str = "SELECT minute, SUM(received) AS received, \
     SUM(processed) AS processed FROM ( \
       SELECT received_at / 60000000 AS minute, COUNT(*) AS received, 0 AS processed \
       FROM hookbox_inbox WHERE id > ? AND received_at >= ? GROUP BY 1 \
       UNION ALL \
       SELECT processed_at / 60000000, 0, COUNT(*) \
       FROM hookbox_inbox WHERE id > ? AND processed_at >= ? GROUP BY 1 \
     ) GROUP BY minute ORDER BY minute";

/// How far a row's `received_at` may run ahead of a row inserted after it: ids
/// follow the insert order, `received_at` the request's arrival, and a receive
/// waits for the write lock or a group commit between the two (and several
/// processes may share the file with clocks apart by a little).
const RECEIVED_AT_SLACK: i64 = 5 * 60 * 1_000_000;

#[derive(diesel::QueryableByName)]
struct StateRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    provider: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
    #[diesel(sql_type = BigInt)]
    failed: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    oldest: Option<i64>,
}

#[derive(diesel::QueryableByName)]
struct ProbeRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = BigInt)]
    received_at: i64,
}

#[derive(diesel::QueryableByName)]
struct MinuteRow {
    #[diesel(sql_type = BigInt)]
    minute: i64,
    #[diesel(sql_type = BigInt)]
    received: i64,
    #[diesel(sql_type = BigInt)]
    processed: i64,
}

/// An id every row received at or after `since` (unix microseconds) is above: a
/// bisection of the primary key on `received_at`, some forty seeks whatever the
/// table's size. The answer is 0 or the id of a row received before `since` less
/// [`RECEIVED_AT_SLACK`], so a row received after `since` but inserted a little
/// before an earlier arrival is still above it.
fn window_start(conn: &mut SqliteConnection, since: i64) -> diesel::QueryResult<i64> {
    let before = since.saturating_sub(RECEIVED_AT_SLACK);
    // every row at or below `low` was received before `before`; the first row at
    // or after `high` was not (or there is none)
    let mut low = 0_i64;
    let mut high = diesel::RunQueryDsl::get_result::<Count>(diesel::sql_query(MAX_ID), conn)?
        .n
        .saturating_add(1);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        let query = diesel::sql_query(PROBE)
            .bind::<BigInt, _>(mid)
            .bind::<BigInt, _>(high);
        let probe = diesel::RunQueryDsl::get_result::<ProbeRow>(query, conn).optional()?;
        match probe {
            Some(row) if row.received_at < before => low = row.id,
            _ => high = mid,
        }
    }
    Ok(low)
}

/// The counts per provider and per minute since `since` ([`InboxAdmin::overview`]),
/// in one read transaction (one snapshot) on the blocking pool. Nothing here reads
/// the whole table: the counts per state come from the partial indexes that hold
/// each state's rows, and the minutes from the rows after [`window_start`].
async fn overview(
    store: &SqliteStore,
    since: OffsetDateTime,
) -> Result<InboxOverview, SqliteError> {
    use diesel::Connection as _;
    let since = minute_of(since);
    let since_micros = micros(since);
    let mut conn = store.connection().await?;
    let (pending, processed, dead, minutes) = conn
        .spawn_blocking(move |conn: &mut SqliteConnection| {
            conn.transaction(|conn| {
                let pending =
                    diesel::RunQueryDsl::load::<StateRow>(sql_query(PENDING_PER_PROVIDER), conn)?;
                let processed =
                    diesel::RunQueryDsl::load::<StateRow>(sql_query(PROCESSED_PER_PROVIDER), conn)?;
                let dead =
                    diesel::RunQueryDsl::load::<StateRow>(sql_query(DEAD_PER_PROVIDER), conn)?;
                let after = window_start(conn, since_micros)?;
                let minutes = sql_query(PER_MINUTE)
                    .bind::<BigInt, _>(after)
                    .bind::<BigInt, _>(since_micros)
                    .bind::<BigInt, _>(after)
                    .bind::<BigInt, _>(since_micros);
                let minutes = diesel::RunQueryDsl::load::<MinuteRow>(minutes, conn)?;
                Ok((pending, processed, dead, minutes))
            })
        })
        .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    // every row is pending, processed or dead: the union of the three is every
    // provider with rows, by name
    let mut providers: BTreeMap<String, ProviderCounts> = BTreeMap::new();
    for row in pending {
        let counts = provider_entry(&mut providers, row.provider);
        counts.pending = count(row.n);
        counts.failed = count(row.failed);
        counts.oldest_pending = row.oldest.and_then(from_micros);
    }
    for row in processed {
        provider_entry(&mut providers, row.provider).processed = count(row.n);
    }
    for row in dead {
        provider_entry(&mut providers, row.provider).dead = count(row.n);
    }
    let seen: Vec<MinuteCounts> = minutes
        .into_iter()
        .filter_map(|m| {
            Some(MinuteCounts {
                minute: from_micros(m.minute.checked_mul(60_000_000)?)?,
                received: count(m.received),
                processed: count(m.processed),
            })
        })
        .collect();
    let now = OffsetDateTime::now_utc();
    Ok(InboxOverview {
        providers: providers.into_values().collect(),
        minutes: fill_minutes(since, now.max(since), &seen),
    })
}

/// `provider`'s counts in `providers`, zero until filled.
fn provider_entry(
    providers: &mut BTreeMap<String, ProviderCounts>,
    provider: String,
) -> &mut ProviderCounts {
    providers
        .entry(provider.clone())
        .or_insert_with(|| ProviderCounts {
            provider,
            pending: 0,
            failed: 0,
            processed: 0,
            dead: 0,
            oldest_pending: None,
        })
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
    use diesel::sql_types::{BigInt, Text};
    use diesel::sqlite::SqliteConnection;
    use hookbox_core::InboxFilter;

    use super::{
        Cursor, DEAD_PER_PROVIDER, PENDING_PER_PROVIDER, PER_MINUTE, PROBE, PROCESSED_PER_PROVIDER,
        RECEIVED_AT_SLACK, inbox_where, list_sql, window_start,
    };

    #[derive(diesel::QueryableByName)]
    struct PlanLine {
        #[diesel(sql_type = Text)]
        detail: String,
    }

    /// A fresh schema; no `ANALYZE` ever ran on it, as on a deployment (the store
    /// never runs one), so the plans below are the ones a large table gets too.
    fn schema() -> SqliteConnection {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        crate::blocking::migrate(&mut conn).unwrap();
        conn
    }

    /// The lines of `EXPLAIN QUERY PLAN` for `sql`, its placeholders unbound.
    fn plan(conn: &mut SqliteConnection, sql: &str) -> Vec<String> {
        diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load::<PlanLine>(conn)
            .unwrap()
            .into_iter()
            .map(|line| line.detail)
            .collect()
    }

    fn reads_whole_table(plan: &[String]) -> bool {
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

    #[test]
    fn the_overview_reads_indexes_and_a_range_of_ids() {
        let mut conn = schema();
        for (sql, index) in [
            (PENDING_PER_PROVIDER, "USING INDEX hookbox_inbox_due"),
            (
                PROCESSED_PER_PROVIDER,
                "USING INDEX hookbox_inbox_processed",
            ),
            (
                DEAD_PER_PROVIDER,
                "USING INDEX hookbox_inbox_dead_by_provider",
            ),
            (PROBE, "USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
            (PER_MINUTE, "USING INTEGER PRIMARY KEY (rowid>?)"),
        ] {
            let plan = plan(&mut conn, sql);
            assert!(!reads_whole_table(&plan), "{sql}: {plan:#?}");
            assert!(
                plan.iter().any(|line| line.contains(index)),
                "{sql}: {plan:#?}"
            );
        }
    }

    #[test]
    fn the_window_starts_below_every_row_received_since() {
        let mut conn = schema();
        let minute = 60_000_000_i64;
        // a row a minute for three hours, some inserted up to two minutes after a
        // later arrival (a slow receive), and a gap of purged ids
        let mut received = Vec::new();
        for i in 0..180_i64 {
            let late = if i % 7 == 3 { 2 * minute } else { 0 };
            received.push(i * minute - late);
        }
        for (n, at) in received.iter().enumerate() {
            diesel::sql_query(
                "INSERT INTO hookbox_inbox (source, provider, delivery_id, body, headers, \
                 received_at) VALUES ('s', 'p', ?, x'', '[]', ?)",
            )
            .bind::<Text, _>(format!("d{n}"))
            .bind::<BigInt, _>(*at)
            .execute(&mut conn)
            .unwrap();
        }
        diesel::sql_query("DELETE FROM hookbox_inbox WHERE id BETWEEN 50 AND 80")
            .execute(&mut conn)
            .unwrap();
        let rows: Vec<(i64, i64)> = (1..=180_i64)
            .filter(|id| !(50..=80).contains(id))
            .map(|id| (id, received[usize::try_from(id - 1).unwrap()]))
            .collect();
        for since in [
            -minute,
            0,
            40 * minute,
            65 * minute,
            120 * minute,
            200 * minute,
        ] {
            let start = window_start(&mut conn, since).unwrap();
            for (id, at) in &rows {
                if *at >= since {
                    assert!(*id > start, "since {since}: row {id} at {at} below {start}");
                }
            }
            // and the window is not much wider than the slack asks
            let below = since - RECEIVED_AT_SLACK - 2 * minute;
            assert!(
                rows.iter()
                    .filter(|(id, _)| *id > start)
                    .all(|(_, at)| *at >= below),
                "since {since}: window from {start} is too wide"
            );
        }
    }
}
