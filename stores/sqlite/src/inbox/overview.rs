//! `InboxAdmin::overview` on SQLite: the counts per provider from the partial
//! indexes the worker, the purge and the console keep, and the minutes of the chart
//! from the range of ids received since the window's start (found by a bisection of
//! the primary key), so no statement reads the whole table.

use std::collections::BTreeMap;

use diesel::OptionalExtension as _;
use diesel::sql_query;
use diesel::sql_types::{BigInt, Nullable};
use diesel::sqlite::SqliteConnection;
use hookbox_core::spi::{fill_minutes, minute_of};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{InboxOverview, MinuteCounts, ProviderCounts};

use crate::error::SqliteError;
use crate::rows::{Count, from_micros, micros};
use crate::store::SqliteStore;

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
pub(super) async fn overview(
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

#[cfg(test)]
mod tests {
    use diesel::RunQueryDsl as _;
    use diesel::sql_types::{BigInt, Text};

    use super::super::tests::{plan, reads_whole_table, schema};
    use super::{
        DEAD_PER_PROVIDER, PENDING_PER_PROVIDER, PER_MINUTE, PROBE, PROCESSED_PER_PROVIDER,
        RECEIVED_AT_SLACK, window_start,
    };

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
