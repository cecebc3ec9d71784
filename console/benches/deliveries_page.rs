//! How fast the console's pages answer over a large inbox: 1,000,000 rows
//! (`HOOKBOX_BENCH_ROWS` for another count), four providers, twenty event types,
//! 80 % processed, 1 % dead letters, the rest pending, received evenly over the
//! last 24 hours (`HOOKBOX_BENCH_SPAN_SECS` for another span: 1000 puts every row
//! in the overview's last hour); each page asked for through the router
//! in-process (no network), after a warm-up. On SQLite always, on PostgreSQL in a
//! fresh schema when `HOOKBOX_PG_URL` answers, and on MySQL or MariaDB in a database
//! of its own when `HOOKBOX_MYSQL_URL` answers.
//!
//! Prints a table per store and then one JSON object per line; the target is a
//! deliveries page with a filter in under 100 ms.
//!
//! ```text
//! HOOKBOX_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//! HOOKBOX_MYSQL_URL=mysql://root@127.0.0.1:3306/test \
//!   cargo bench -p hookbox-console --bench deliveries_page
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use hookbox_console::{Console, ConsoleAuth, ConsoleStore};
use hookbox_core::{InboxAdmin, InboxFilter};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

const ADMIN: &str = "bench-admin-token-0123456789";
/// The answer time the issue asks of a filtered deliveries page.
const TARGET: Duration = Duration::from_millis(100);
const RUNS: usize = 15;

/// Inserts rows `from..=to` in one statement, `?4` microseconds apart from `?3`
/// (SQLite: times in microseconds).
const SQLITE_INSERT: &str = "INSERT INTO hookbox_inbox (source, provider, delivery_id, event_type, body, headers, \
     received_at, processed_at, attempts, last_error, next_attempt_at, dead_at) \
     WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2) \
     SELECT 'bench', \
       CASE i % 4 WHEN 0 THEN 'stripe' WHEN 1 THEN 'github' WHEN 2 THEN 'shopify' ELSE 'standard' END, \
       'evt_' || i, 'event.' || (i % 20), \
       CAST('{\"id\":\"evt_' || i || '\",\"amount\":' || (i % 1000) || '}' AS BLOB), '[]', \
       ?3 + i * ?4, \
       CASE WHEN i % 100 < 80 THEN ?3 + i * ?4 + 500 END, \
       CASE WHEN i % 100 = 99 THEN 5 ELSE 0 END, \
       CASE WHEN i % 100 = 99 THEN 'handler failed: boom' END, \
       ?3 + i * ?4, \
       CASE WHEN i % 100 = 99 THEN ?3 + i * ?4 + 900 END \
     FROM n";

/// The same rows on PostgreSQL, `$1..=$2`, `$4` microseconds apart from `$3`.
const PG_INSERT: &str = "INSERT INTO hookbox_inbox (source, provider, delivery_id, event_type, body, headers, \
     received_at, processed_at, attempts, last_error, next_attempt_at, dead_at) \
     SELECT 'bench', \
       CASE i % 4 WHEN 0 THEN 'stripe' WHEN 1 THEN 'github' WHEN 2 THEN 'shopify' ELSE 'standard' END, \
       'evt_' || i, 'event.' || (i % 20), \
       convert_to('{\"id\":\"evt_' || i || '\",\"amount\":' || (i % 1000) || '}', 'UTF8'), '[]', \
       $3 + i * $4 * interval '1 microsecond', \
       CASE WHEN i % 100 < 80 THEN $3 + i * $4 * interval '1 microsecond' + interval '500 microseconds' END, \
       CASE WHEN i % 100 = 99 THEN 5 ELSE 0 END, \
       CASE WHEN i % 100 = 99 THEN 'handler failed: boom' END, \
       $3 + i * $4 * interval '1 microsecond', \
       CASE WHEN i % 100 = 99 THEN $3 + i * $4 * interval '1 microsecond' + interval '900 microseconds' END \
     FROM generate_series($1::bigint, $2::bigint) AS i";

/// The same rows on MySQL, `{from}..={to}` (integers the bench formats in: MySQL
/// has no `generate_series`, and a recursive CTE stops at 1,000 rows on MySQL 8;
/// the ids are given, as InnoDB's bulk inserts may leave gaps between statements),
/// `{step}` microseconds apart from `{start}` (unix microseconds; `DATETIME`
/// arithmetic, so no session time zone enters).
fn mysql_insert(from: i64, to: i64, start_us: i64, step_us: i64) -> String {
    let digit = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
         UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
         UNION ALL SELECT 8 UNION ALL SELECT 9)";
    let at = |extra_us: i64| {
        format!(
            "TIMESTAMPADD(MICROSECOND, {start_us} + i * {step_us} + {extra_us}, \
             '1970-01-01 00:00:00')"
        )
    };
    format!(
        "INSERT INTO hookbox_inbox (id, source, provider, delivery_id, event_type, body, headers, \
           received_at, processed_at, attempts, last_error, next_attempt_at, dead_at) \
         SELECT i, 'bench', ELT(1 + i % 4, 'stripe', 'github', 'shopify', 'standard'), \
           CONCAT('evt_', i), CONCAT('event.', i % 20), \
           CONCAT('{{\"id\":\"evt_', i, '\",\"amount\":', i % 1000, '}}'), '[]', \
           {received}, CASE WHEN i % 100 < 80 THEN {processed} END, \
           CASE WHEN i % 100 = 99 THEN 5 ELSE 0 END, \
           CASE WHEN i % 100 = 99 THEN 'handler failed: boom' END, \
           {received}, CASE WHEN i % 100 = 99 THEN {dead} END \
         FROM (SELECT {from} + d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d + 10000 * d4.d \
                 AS i \
               FROM {digit} d0, {digit} d1, {digit} d2, {digit} d3, {digit} d4) n \
         WHERE i <= {to} ORDER BY i",
        received = at(0),
        processed = at(500),
        dead = at(900),
    )
}

const BATCH: i64 = 100_000;

/// How the rows are spread in time: `rows` of them, `step_us` apart.
#[derive(Debug, Clone, Copy)]
struct Layout {
    rows: i64,
    step_us: i64,
}

impl Layout {
    /// `rows` rows received evenly over `span_secs`, the newest a minute ago.
    fn new(rows: i64, span_secs: i64) -> Self {
        let step_us = (span_secs.saturating_mul(1_000_000) / rows.max(1)).max(1);
        Self { rows, step_us }
    }

    /// When row 0 would have been received.
    fn start(self) -> hookbox_core::time::OffsetDateTime {
        let span = Duration::from_micros((self.rows * self.step_us) as u64);
        hookbox_core::time::OffsetDateTime::now_utc() - span - Duration::from_secs(60)
    }
}

async fn fill_sqlite(store: &SqliteStore, layout: Layout) {
    use hookbox_sqlite::diesel;
    use hookbox_sqlite::diesel::sql_types::BigInt;
    use hookbox_sqlite::diesel_async::RunQueryDsl as _;
    let start_us = layout.start().unix_timestamp() * 1_000_000;
    let rows = layout.rows;
    let mut conn = store.connection().await.unwrap();
    let mut from = 1;
    while from <= rows {
        let to = (from + BATCH - 1).min(rows);
        diesel::sql_query(SQLITE_INSERT)
            .bind::<BigInt, _>(from)
            .bind::<BigInt, _>(to)
            .bind::<BigInt, _>(start_us)
            .bind::<BigInt, _>(layout.step_us)
            .execute(&mut *conn)
            .await
            .unwrap();
        from = to + 1;
    }
    // no ANALYZE: hookbox-sqlite does not run one, so the planner sees what a
    // deployment's planner sees
}

async fn fill_mysql(store: &MysqlStore, layout: Layout) {
    use hookbox_diesel_mysql::diesel;
    use hookbox_diesel_mysql::diesel_async::RunQueryDsl as _;
    let start_us = layout.start().unix_timestamp() * 1_000_000;
    let rows = layout.rows;
    let mut conn = store.connection().await.unwrap();
    let mut from = 1;
    while from <= rows {
        let to = (from + BATCH - 1).min(rows);
        diesel::sql_query(mysql_insert(from, to, start_us, layout.step_us))
            .execute(&mut *conn)
            .await
            .unwrap();
        from = to + 1;
    }
    // what InnoDB's persistent statistics do soon after a load this size
    diesel::sql_query("ANALYZE TABLE hookbox_inbox")
        .execute(&mut *conn)
        .await
        .unwrap();
}

async fn fill_postgres(store: &PgStore, layout: Layout) {
    use hookbox_diesel_pg::diesel;
    use hookbox_diesel_pg::diesel::sql_types::{BigInt, Timestamptz};
    use hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
    let start = layout.start();
    let rows = layout.rows;
    let mut conn = store.connection().await.unwrap();
    let mut from = 1;
    while from <= rows {
        let to = (from + BATCH - 1).min(rows);
        diesel::sql_query(PG_INSERT)
            .bind::<BigInt, _>(from)
            .bind::<BigInt, _>(to)
            .bind::<Timestamptz, _>(start)
            .bind::<BigInt, _>(layout.step_us)
            .execute(&mut *conn)
            .await
            .unwrap();
        from = to + 1;
    }
    // what autovacuum does soon after a load this size
    diesel::sql_query("ANALYZE hookbox_inbox")
        .execute(&mut *conn)
        .await
        .unwrap();
}

async fn time(app: &Router, path: &str) -> (Duration, usize) {
    let started = Instant::now();
    let response = app
        .clone()
        .oneshot(
            Request::get(path)
                .header("host", "bench")
                .header("authorization", format!("Bearer {ADMIN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let elapsed = started.elapsed();
    assert_eq!(
        status,
        StatusCode::OK,
        "{path}: {}",
        String::from_utf8_lossy(&bytes)
    );
    (elapsed, bytes.len())
}

/// Measures every page on `store`; returns the JSON lines.
async fn measure(label: &str, store: impl ConsoleStore + 'static, rows: i64) -> Vec<Value> {
    // the store's own answer time for the filters that are slowest on a table
    // without a matching index, without the page around it
    for (name, filter) in [
        ("provider", InboxFilter::all().with_provider("stripe")),
        (
            "provider + event type",
            InboxFilter::all()
                .with_provider("stripe")
                .with_event_type("event.4"),
        ),
    ] {
        let started = Instant::now();
        let found = InboxAdmin::list(&store, filter, 51).await.unwrap();
        println!(
            "{label}: InboxAdmin::list ({name}): {} rows in {:.2} ms",
            found.len(),
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    let auth = ConsoleAuth::tokens(None, Some(ADMIN.into())).unwrap();
    let app = Console::new(store, auth).router();
    let cases: Vec<(&str, String)> = vec![
        ("deliveries, no filter", "/deliveries".into()),
        (
            "deliveries, an older page (keyset)",
            format!("/deliveries?before={}", rows - 5000),
        ),
        ("deliveries, state=dead", "/deliveries?state=dead".into()),
        (
            "deliveries, state=pending",
            "/deliveries?state=pending".into(),
        ),
        ("deliveries, provider", "/deliveries?provider=stripe".into()),
        (
            "deliveries, provider + event type",
            "/deliveries?provider=stripe&event_type=event.4".into(),
        ),
        (
            "deliveries, dead + provider",
            "/deliveries?state=dead&provider=github".into(),
        ),
        (
            "deliveries, delivery id",
            format!("/deliveries?delivery_id=evt_{}", rows / 2),
        ),
        (
            "deliveries, time range",
            "/deliveries?since=2000-01-01T00%3A00&until=2999-01-01T00%3A00".into(),
        ),
        (
            "deliveries, body search",
            "/deliveries?body=%22amount%22%3A999".into(),
        ),
        ("delivery detail", format!("/deliveries/{}", rows / 2)),
        (
            "replay confirmation (count dead)",
            "/deliveries/confirm?action=replay&state=dead".into(),
        ),
        ("overview", "/overview".into()),
    ];
    let mut results = Vec::new();
    println!();
    println!(
        "{label}, {rows} rows\n{:<36} {:>9} {:>9} {:>9} {:>8}  target",
        "page", "p50 ms", "p95 ms", "max ms", "bytes"
    );
    for (name, path) in &cases {
        for _ in 0..2 {
            time(&app, path).await;
        }
        let mut samples = Vec::with_capacity(RUNS);
        let mut bytes = 0;
        for _ in 0..RUNS {
            let (elapsed, size) = time(&app, path).await;
            samples.push(elapsed);
            bytes = size;
        }
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let (p50, p95, max) = (
            samples[RUNS / 2],
            samples[RUNS * 95 / 100],
            samples[RUNS - 1],
        );
        // a filtered deliveries page is what the target is about
        let filtered = path.starts_with("/deliveries?") && !path.contains("before=");
        let verdict = if !filtered {
            "-"
        } else if p50 < TARGET {
            "ok"
        } else {
            "OVER"
        };
        println!(
            "{name:<36} {:>9.2} {:>9.2} {:>9.2} {bytes:>8}  {verdict}",
            ms(p50),
            ms(p95),
            ms(max)
        );
        results.push(json!({
            "bench": "console_page",
            "store": label,
            "rows": rows,
            "page": name,
            "path": path,
            "p50_ms": ms(p50),
            "p95_ms": ms(p95),
            "max_ms": ms(max),
            "bytes": bytes,
            "target_ms": filtered.then_some(ms(TARGET)),
            "within_target": filtered.then_some(p50 < TARGET),
        }));
    }
    results
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: i64 = std::env::var("HOOKBOX_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let span_secs: i64 = std::env::var("HOOKBOX_BENCH_SPAN_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(86_400);
    let layout = Layout::new(rows, span_secs);
    println!(
        "{rows} rows over {span_secs} s ({} us apart)",
        layout.step_us
    );
    let mut lines = Vec::new();

    let dir = TempDir::new();
    let store = SqliteStore::open(dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let filling = Instant::now();
    fill_sqlite(&store, layout).await;
    println!(
        "sqlite: filled {rows} rows in {:.1} s",
        filling.elapsed().as_secs_f64()
    );
    lines.extend(measure("sqlite", store, rows).await);

    if std::env::var("HOOKBOX_PG_URL").is_ok_and(|url| !url.is_empty()) {
        if let Some(schema) = hookbox_testkit::PgSchema::create().await {
            let store = PgStore::connect(&schema.url(), PgOptions::new())
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let filling = Instant::now();
            fill_postgres(&store, layout).await;
            println!(
                "\npostgres: filled {rows} rows in {:.1} s",
                filling.elapsed().as_secs_f64()
            );
            lines.extend(measure("postgres", store, rows).await);
        }
    } else {
        println!("\npostgres: skipped (HOOKBOX_PG_URL not set)");
    }

    if std::env::var("HOOKBOX_MYSQL_URL").is_ok_and(|url| !url.is_empty()) {
        if let Some(database) = hookbox_testkit::MysqlDatabase::create().await {
            let store = MysqlStore::connect(&database.url(), MysqlOptions::new())
                .await
                .unwrap();
            store.migrate().await.unwrap();
            let filling = Instant::now();
            fill_mysql(&store, layout).await;
            println!(
                "\nmysql: filled {rows} rows in {:.1} s",
                filling.elapsed().as_secs_f64()
            );
            lines.extend(measure("mysql", store, rows).await);
        }
    } else {
        println!("\nmysql: skipped (HOOKBOX_MYSQL_URL not set)");
    }

    println!();
    for line in lines {
        println!("{line}");
    }
}
