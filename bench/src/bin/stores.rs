//! Claims per second through hookbox's stores, beside a raw loop of the same SQL
//! statements through the same driver (diesel-async) without hookbox.
//!
//! For SQLite (a file in a temporary directory, at `synchronous = FULL` as the store
//! ships, and at `NORMAL` for comparison) and PostgreSQL (`HOOKBOX_PG_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`, in a fresh schema dropped at the end;
//! the Postgres rows are skipped when the server is unreachable) it prints:
//!
//! 1. claims per second: `IdempotencyStore::process_once` of a fresh key with a
//!    one-row `UPDATE` side effect, one transaction each, beside the raw loop
//!    (begin / the store's exact `INSERT … ON CONFLICT DO NOTHING`, built and cached
//!    as the store builds it / the same `UPDATE` / commit, on a pool built with the
//!    store's settings) and the ratio;
//! 2. on SQLite only, below each of those rows, a `process_once_blocking` row:
//!    `SqliteStore::process_once_blocking` of a fresh key with the same `UPDATE` as
//!    a sync diesel side effect (the claim, the `UPDATE` and the commit in one trip
//!    to tokio's blocking pool), measured in the same rounds, beside the same raw
//!    loop and, after the per-round ratios, beside `process_once`;
//! 3. the duplicate path: `process_once` of keys that are already claimed;
//! 4. the worker: rows per second drained by `Inbox::work_one` with the same
//!    `UPDATE` as its handler, after `receive`-ing the rows.
//!
//! Every claim figure is the median of rounds of fixed duration that alternate
//! hookbox and raw (and `process_once_blocking`, in the middle) after a warm-up, so
//! drift on a busy machine hits every column alike. Every side effect that commits
//! is counted, and the ledger it bumps is checked against that count at the end.
//!
//! Run: `cargo run --release -p hookbox-bench --bin hookbox-bench-stores`
//! (`HOOKBOX_BENCH_ROUND_MS` sets the round length, default 1000;
//! `HOOKBOX_BENCH_DIR` the directory for the SQLite files, default the temp dir;
//! an unreachable `HOOKBOX_PG_URL` runs the SQLite rows alone).
#![allow(clippy::print_stdout)] // printing the table is this binary's job

use std::borrow::Cow;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadpool::Runtime;
use diesel::connection::SimpleConnection as _;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel::{ConnectionError, ExpressionMethods as _, QueryDsl as _, QueryableByName};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{
    AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _, SimpleAsyncConnection as _,
};
use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, Delivery, HandlerError, IdempotencyStore as _, Inbox as _, KeptHeaders,
    VerifiedDelivery, Worked,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::{SqliteOptions, SqliteStore, Synchronous};

type BoxErr = Box<dyn Error + Send + Sync>;
type SqliteConn = hookbox_sqlite::Conn;

const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const PG_URL_VAR: &str = "HOOKBOX_PG_URL";

/// The ledger rows side effects update: one per task (or worker row), so concurrent
/// transactions never wait on each other's row lock.
const ACCOUNTS: [&str; 16] = [
    "acct_00", "acct_01", "acct_02", "acct_03", "acct_04", "acct_05", "acct_06", "acct_07",
    "acct_08", "acct_09", "acct_10", "acct_11", "acct_12", "acct_13", "acct_14", "acct_15",
];

/// What the worker rows carry: a small Stripe-shaped event.
const BODY: &[u8] = br#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1","object":"payment_intent","amount":2000,"currency":"usd"}}}"#;

diesel::table! {
    /// The side effects' table.
    bench_ledger (account) {
        /// The account (`acct_00` … `acct_15`).
        account -> Text,
        /// One per committed side effect.
        balance -> BigInt,
    }
}

diesel::table! {
    /// The columns of `hookbox-diesel-pg`'s key table that its claim inserts (its
    /// `schema.rs`), so the raw loop's query builder prints the same statement.
    hookbox_processed_keys (source, provider, delivery_id) {
        /// `DedupeKey::scope()`.
        source -> Text,
        /// `DedupeKey::provider()`.
        provider -> Text,
        /// `DedupeKey::delivery_id()`.
        delivery_id -> Text,
    }
}

/// `hookbox-sqlite`'s key table as its claim sees it (stores/sqlite/src/schema.rs), so
/// the raw SQLite loop builds the store's claim (`claim_query!` in its `store.rs`)
/// with the same query builder: the same statement, prepared once per connection
/// and cached, as there.
mod sqlite_schema {
    diesel::table! {
        /// The dedupe keys.
        hookbox_processed_keys (source, provider, delivery_id) {
            /// `DedupeKey::scope()`.
            source -> Text,
            /// `DedupeKey::provider()`.
            provider -> Text,
            /// `DedupeKey::delivery_id()`.
            delivery_id -> Text,
            /// Unix microseconds of the claim.
            received_at -> BigInt,
        }
    }
}

/// The side effect on SQLite: one row, `balance + 1`.
async fn sqlite_bump(conn: &mut SqliteConn, account: &str) -> diesel::QueryResult<usize> {
    diesel::update(bench_ledger::table.find(account))
        .set(bench_ledger::balance.eq(bench_ledger::balance + 1))
        .execute(conn)
        .await
}

/// The side effect of `process_once_blocking`: [`sqlite_bump`]'s statement, run by
/// sync diesel on the blocking thread that runs the whole transaction.
fn sqlite_bump_blocking(conn: &mut SqliteConnection, account: &str) -> diesel::QueryResult<usize> {
    // spelled out: diesel-async's `RunQueryDsl` is in scope too, for the other paths
    diesel::RunQueryDsl::execute(
        diesel::update(bench_ledger::table.find(account))
            .set(bench_ledger::balance.eq(bench_ledger::balance + 1)),
        conn,
    )
}

/// The side effect on Postgres: the same statement.
async fn pg_bump(conn: &mut AsyncPgConnection, account: &str) -> diesel::QueryResult<usize> {
    diesel::update(bench_ledger::table.find(account))
        .set(bench_ledger::balance.eq(bench_ledger::balance + 1))
        .execute(conn)
        .await
}

/// The worker's handler on SQLite: the side effect, on an account picked by the
/// delivery's number.
async fn sqlite_handler(conn: &mut SqliteConn, delivery: &Delivery) -> Result<(), HandlerError> {
    sqlite_bump(conn, account_of(delivery)).await?;
    Ok(())
}

/// The worker's handler on Postgres.
async fn pg_handler(conn: &mut AsyncPgConnection, delivery: &Delivery) -> Result<(), HandlerError> {
    pg_bump(conn, account_of(delivery)).await?;
    Ok(())
}

/// The account a worker row updates: by the number that ends its delivery id
/// ([`bench_key`]), so consecutive rows, which workers take side by side, update
/// different accounts.
fn account_of(delivery: &Delivery) -> &'static str {
    let n = delivery
        .delivery_id()
        .rsplit('_')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    ACCOUNTS[(n % ACCOUNTS.len() as u64) as usize]
}

fn unix_micros(at: OffsetDateTime) -> i64 {
    let micros = at.unix_timestamp_nanos() / 1000;
    micros.clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// The raw loop's transaction on SQLite: what `SqliteStore::process_once` runs, by
/// hand, on a connection from a pool set up like the store's.
async fn sqlite_raw_claim(
    pool: &Pool<SqliteConn>,
    key: &DedupeKey,
    account: &'static str,
) -> Result<bool, BoxErr> {
    use sqlite_schema::hookbox_processed_keys as keys;
    let mut conn = pool.get().await?;
    let applied = conn
        .immediate_transaction(async |conn: &mut SqliteConn| -> diesel::QueryResult<bool> {
            let inserted = diesel::insert_into(keys::table)
                .values((
                    keys::source.eq(key.scope()),
                    keys::provider.eq(key.provider()),
                    keys::delivery_id.eq(key.delivery_id()),
                    keys::received_at.eq(unix_micros(OffsetDateTime::now_utc())),
                ))
                .on_conflict_do_nothing()
                .execute(conn)
                .await?;
            if inserted != 1 {
                return Ok(false);
            }
            sqlite_bump(conn, account).await?;
            Ok(true)
        })
        .await?;
    Ok(applied)
}

/// The raw loop's transaction on Postgres: what `PgStore::process_once` runs.
async fn pg_raw_claim(
    pool: &Pool<AsyncPgConnection>,
    key: &DedupeKey,
    account: &'static str,
) -> Result<bool, BoxErr> {
    let mut pooled = pool.get().await?;
    // on the connection itself, as the store's `PooledConnection` derefs to it
    let conn: &mut AsyncPgConnection = &mut pooled;
    let applied = conn
        .transaction(
            async |conn: &mut AsyncPgConnection| -> diesel::QueryResult<bool> {
                let inserted = diesel::insert_into(hookbox_processed_keys::table)
                    .values((
                        hookbox_processed_keys::source.eq(key.scope()),
                        hookbox_processed_keys::provider.eq(key.provider()),
                        hookbox_processed_keys::delivery_id.eq(key.delivery_id()),
                    ))
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .await?;
                if inserted != 1 {
                    return Ok(false);
                }
                pg_bump(conn, account).await?;
                Ok(true)
            },
        )
        .await?;
    Ok(applied)
}

/// A pool set up as `hookbox-sqlite`'s (stores/sqlite/src/pool.rs): deadpool,
/// `RecyclingMethod::Fast`, the same `PRAGMA`s on every new connection.
fn raw_sqlite_pool(
    path: &str,
    synchronous: &'static str,
    size: usize,
) -> Result<Pool<SqliteConn>, BoxErr> {
    let mut config = ManagerConfig::<SqliteConn>::default();
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(move |url| {
        let url = url.to_string();
        Box::pin(async move {
            let mut conn = SqliteConn::establish(&url).await?;
            conn.spawn_blocking(move |conn: &mut SqliteConnection| {
                conn.batch_execute(&format!(
                    "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; \
                     PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON;"
                ))
            })
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        })
    });
    let manager = AsyncDieselConnectionManager::<SqliteConn>::new_with_config(path, config);
    Ok(Pool::builder(manager).max_size(size).build()?)
}

/// A pool set up as `hookbox-diesel-pg`'s (stores/diesel-pg/src/pool.rs): deadpool on
/// tokio with 5 s timeouts, `RecyclingMethod::Fast`, the same `SET`s on every new
/// connection; without the store's statement-failure instrumentation.
fn raw_pg_pool(url: &str, schema: &str, size: usize) -> Result<Pool<AsyncPgConnection>, BoxErr> {
    let setup: Arc<str> =
        format!("SET lock_timeout = '5000ms'; SET search_path TO \"{schema}\"").into();
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(move |url| {
        let url = url.to_string();
        let setup = Arc::clone(&setup);
        Box::pin(async move {
            let mut conn = AsyncPgConnection::establish(&url).await?;
            let _ = conn.batch_execute("SET lc_messages TO 'C'").await;
            conn.batch_execute(&setup)
                .await
                .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        })
    });
    let manager = AsyncDieselConnectionManager::new_with_config(url, config);
    let timeout = Some(Duration::from_secs(5));
    Ok(Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(timeout)
        .create_timeout(timeout)
        .recycle_timeout(timeout)
        .build()?)
}

/// A store and, beside it, a raw pool on the same database.
enum Backend {
    Sqlite {
        store: SqliteStore,
        raw: Pool<SqliteConn>,
    },
    Pg {
        store: PgStore,
        raw: Pool<AsyncPgConnection>,
    },
}

/// What a bench runs against; `applied` counts the side effects that committed on
/// its database, for the ledger check at the end.
struct Target {
    backend: Backend,
    applied: Arc<AtomicU64>,
}

/// Who runs a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// `IdempotencyStore::process_once`, with an async side effect.
    Hookbox,
    /// `SqliteStore::process_once_blocking`, with a sync side effect (SQLite only).
    Blocking,
    /// The same statements by hand, through diesel-async.
    Raw,
}

#[derive(QueryableByName)]
struct TextRow {
    #[diesel(sql_type = Text)]
    v: String,
}

#[derive(QueryableByName)]
struct IntRow {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

const LEDGER_TOTAL: &str =
    "SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) AS n FROM bench_ledger";

impl Target {
    /// One transaction: claim `key` and, if new, bump `account`. `true` when applied.
    async fn claim(
        &self,
        side: Side,
        key: &DedupeKey,
        account: &'static str,
    ) -> Result<bool, BoxErr> {
        match (&self.backend, side) {
            (Backend::Sqlite { store, .. }, Side::Hookbox) => {
                let done = store
                    .process_once(key, async move |conn| Ok(sqlite_bump(conn, account).await?))
                    .await?;
                Ok(!done.is_duplicate())
            }
            (Backend::Sqlite { store, .. }, Side::Blocking) => {
                let done = store
                    .process_once_blocking(key, move |conn| {
                        Ok(sqlite_bump_blocking(conn, account)?)
                    })
                    .await?;
                Ok(!done.is_duplicate())
            }
            (Backend::Sqlite { raw, .. }, Side::Raw) => sqlite_raw_claim(raw, key, account).await,
            (Backend::Pg { store, .. }, Side::Hookbox) => {
                let done = store
                    .process_once(key, async move |conn| Ok(pg_bump(conn, account).await?))
                    .await?;
                Ok(!done.is_duplicate())
            }
            (Backend::Pg { .. }, Side::Blocking) => {
                Err("process_once_blocking is hookbox-sqlite's alone".into())
            }
            (Backend::Pg { raw, .. }, Side::Raw) => pg_raw_claim(raw, key, account).await,
        }
    }

    async fn receive(&self, delivery: &VerifiedDelivery) -> Result<(), BoxErr> {
        match &self.backend {
            Backend::Sqlite { store, .. } => store.receive(delivery).await?,
            Backend::Pg { store, .. } => store.receive(delivery).await?,
        };
        Ok(())
    }

    async fn work_one(&self) -> Result<Worked, BoxErr> {
        Ok(match &self.backend {
            Backend::Sqlite { store, .. } => store.work_one(&sqlite_handler).await?,
            Backend::Pg { store, .. } => store.work_one(&pg_handler).await?,
        })
    }

    /// The sum of the ledger: one per committed side effect.
    async fn ledger_total(&self) -> Result<i64, BoxErr> {
        Ok(match &self.backend {
            Backend::Sqlite { raw, .. } => {
                let mut conn = raw.get().await?;
                diesel::sql_query(LEDGER_TOTAL)
                    .get_result::<IntRow>(&mut *conn)
                    .await?
                    .n
            }
            Backend::Pg { raw, .. } => {
                let mut conn = raw.get().await?;
                diesel::sql_query(LEDGER_TOTAL)
                    .get_result::<IntRow>(&mut *conn)
                    .await?
                    .n
            }
        })
    }
}

/// Which keys a run claims.
#[derive(Clone)]
enum Keys {
    /// New keys under a label no other run uses.
    Fresh(Arc<str>),
    /// Keys claimed before, in turn.
    Existing(Arc<Vec<DedupeKey>>),
}

impl Keys {
    fn fresh() -> Self {
        Self::Fresh(next_label().into())
    }

    fn key(&self, task: usize, tasks: usize, n: u64) -> Cow<'_, DedupeKey> {
        match self {
            Self::Fresh(label) => Cow::Owned(bench_key(label, task, n)),
            Self::Existing(keys) => {
                Cow::Borrowed(&keys[(n as usize * tasks + task) % keys.len().max(1)])
            }
        }
    }
}

fn next_label() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("r{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn bench_key(label: &str, task: usize, n: u64) -> DedupeKey {
    DedupeKey::new(
        "bench",
        "standard",
        format!("evt_{label}_{task:02}_{n:010}"),
    )
}

/// What one timed run did.
struct Run {
    ops: u64,
    applied: u64,
    per_task: Vec<u64>,
    secs: f64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs
    }
}

/// Runs `tasks` concurrent loops of one claim transaction each until `duration`
/// has passed.
async fn run(
    target: &Arc<Target>,
    side: Side,
    tasks: usize,
    keys: &Keys,
    duration: Duration,
) -> Result<Run, BoxErr> {
    let start = Instant::now();
    let deadline = start + duration;
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let target = Arc::clone(target);
        let keys = keys.clone();
        handles.push(tokio::spawn(async move {
            let account = ACCOUNTS[task % ACCOUNTS.len()];
            let (mut n, mut applied) = (0u64, 0u64);
            while Instant::now() < deadline {
                let key = keys.key(task, tasks, n);
                applied += u64::from(target.claim(side, &key, account).await?);
                n += 1;
            }
            Ok::<_, BoxErr>((n, applied))
        }));
    }
    let mut run = Run {
        ops: 0,
        applied: 0,
        per_task: Vec::with_capacity(tasks),
        secs: 0.0,
    };
    for handle in handles {
        let (n, applied) = handle.await??;
        run.ops += n;
        run.applied += applied;
        run.per_task.push(n);
    }
    run.secs = start.elapsed().as_secs_f64();
    target.applied.fetch_add(run.applied, Ordering::Relaxed);
    Ok(run)
}

/// How long each measurement runs.
struct Timing {
    warm: Duration,
    round: Duration,
    rounds: usize,
    drain: Duration,
}

impl Timing {
    fn from_env() -> Self {
        let ms = std::env::var("HOOKBOX_BENCH_ROUND_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .unwrap_or(1000);
        let round = Duration::from_millis(ms);
        Self {
            warm: round * 3 / 10,
            round,
            rounds: 3,
            drain: round * 2,
        }
    }
}

/// The rates of alternating hookbox and raw rounds (and `process_once_blocking`
/// rounds, when measured).
struct Pair {
    hookbox: Vec<f64>,
    /// Empty unless `Side::Blocking` was measured.
    blocking: Vec<f64>,
    raw: Vec<f64>,
    /// The label and per-task counts of the first measured hookbox round of fresh
    /// keys: the keys it claimed, for the duplicate rows.
    first: Option<(Arc<str>, Vec<u64>)>,
}

impl Pair {
    fn claimed_keys(&self) -> Vec<DedupeKey> {
        let Some((label, per_task)) = &self.first else {
            return Vec::new();
        };
        per_task
            .iter()
            .enumerate()
            .flat_map(|(task, &n)| (0..n).map(move |n| bench_key(label, task, n)))
            .collect()
    }

    fn hookbox_median(&self) -> f64 {
        median(&self.hookbox)
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// Hookbox's `process_once` beside the raw loop.
const PAIR: &[Side] = &[Side::Hookbox, Side::Raw];
/// Both of `hookbox-sqlite`'s claim paths beside the raw loop; `Blocking` in the
/// middle, so that it is as near to each of the others, in every round order.
const SQLITE_TRIO: &[Side] = &[Side::Hookbox, Side::Blocking, Side::Raw];

/// Measures `sides` in alternating rounds; `existing` is `None` for fresh keys
/// (every claim must apply) or the keys to claim again (none may apply).
async fn pair(
    target: &Arc<Target>,
    sides: &[Side],
    tasks: usize,
    existing: Option<&Arc<Vec<DedupeKey>>>,
    timing: &Timing,
    anomalies: &mut Vec<String>,
) -> Result<Pair, BoxErr> {
    let keys = || existing.map_or_else(Keys::fresh, |k| Keys::Existing(Arc::clone(k)));
    let mut check = |side: Side, run: &Run| {
        let expected = if existing.is_none() { run.ops } else { 0 };
        if run.applied != expected {
            anomalies.push(format!(
                "{side:?} at {tasks} tasks applied {} of {} claims, expected {expected}",
                run.applied, run.ops
            ));
        }
    };
    for &side in sides {
        let warm = run(target, side, tasks, &keys(), timing.warm).await?;
        check(side, &warm);
    }
    let mut pair = Pair {
        hookbox: Vec::new(),
        blocking: Vec::new(),
        raw: Vec::new(),
        first: None,
    };
    for round in 0..timing.rounds {
        // H R, R H, H R (or H B R, R B H, H B R): a steady drift of the machine's
        // load favours no side
        let mut order = sides.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        for side in order {
            let keys = keys();
            let measured = run(target, side, tasks, &keys, timing.round).await?;
            check(side, &measured);
            match side {
                Side::Hookbox => {
                    if let (None, Keys::Fresh(label)) = (&pair.first, &keys) {
                        pair.first = Some((Arc::clone(label), measured.per_task.clone()));
                    }
                    pair.hookbox.push(measured.rate());
                }
                Side::Blocking => pair.blocking.push(measured.rate()),
                Side::Raw => pair.raw.push(measured.rate()),
            }
        }
    }
    Ok(pair)
}

const PAIR_HEADER: &str = "store     setting                        tasks   hookbox/s       raw/s   ratio   \
     per-round ratios";

/// The `process_once` row: hookbox beside the raw loop.
fn print_pair(store: &str, setting: &str, tasks: usize, pair: &Pair) {
    println!(
        "{}",
        pair_row(store, setting, tasks, &pair.hookbox, &pair.raw)
    );
}

/// The `process_once_blocking` row of a [`SQLITE_TRIO`]: its rate beside the raw
/// loop, then its ratio to `process_once` in the same rounds (median, per-round
/// range). `level` is the `synchronous` level, as `FULL`.
fn print_blocking(store: &str, level: &str, tasks: usize, pair: &Pair) {
    let setting = format!("{level}, process_once_blocking");
    let row = pair_row(store, &setting, tasks, &pair.blocking, &pair.raw);
    let ratio = median(&pair.blocking) / median(&pair.hookbox);
    let (low, high) = ratio_range(&pair.blocking, &pair.hookbox);
    println!("{row}   {ratio:.2}x process_once ({low:.2}-{high:.2})");
}

/// One row of [`PAIR_HEADER`]: the medians of `measured` and `raw`, their ratio, and
/// the range of the ratios of the rounds.
fn pair_row(store: &str, setting: &str, tasks: usize, measured: &[f64], raw: &[f64]) -> String {
    let (rate, raw_rate) = (median(measured), median(raw));
    let (low, high) = ratio_range(measured, raw);
    format!(
        "{store:<10}{setting:<30}{tasks:>6}{:>12}{:>12}{:>7.2}x   {low:.2}-{high:.2}",
        thousands(rate),
        thousands(raw_rate),
        rate / raw_rate,
    )
}

/// The lowest and highest ratio of `a` to `b` round by round.
fn ratio_range(a: &[f64], b: &[f64]) -> (f64, f64) {
    let rounds: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    let low = rounds.iter().copied().fold(f64::INFINITY, f64::min);
    let high = rounds.iter().copied().fold(0.0, f64::max);
    (low, high)
}

/// `12345.6` as `12,346`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What one worker row measured.
struct Drained {
    received: u64,
    receive_rate: f64,
    processed: u64,
    rate: f64,
}

/// Receives `rows` deliveries (4 tasks), then drains with `workers` tasks calling
/// `work_one` until the inbox is empty or `timing.drain` has passed.
async fn worker_row(
    target: &Arc<Target>,
    workers: usize,
    rows: u64,
    timing: &Timing,
    anomalies: &mut Vec<String>,
) -> Result<Drained, BoxErr> {
    const RECEIVERS: u64 = 4;
    let label: Arc<str> = next_label().into();
    let start = Instant::now();
    let mut handles = Vec::new();
    for task in 0..RECEIVERS {
        let target = Arc::clone(target);
        let label = Arc::clone(&label);
        handles.push(tokio::spawn(async move {
            let mut n = task;
            while n < rows {
                let delivery = VerifiedDelivery::new(
                    bench_key(&label, task as usize, n),
                    Bytes::from_static(BODY),
                    KeptHeaders::default(),
                );
                target.receive(&delivery).await?;
                n += RECEIVERS;
            }
            Ok::<_, BoxErr>(())
        }));
    }
    for handle in handles {
        handle.await??;
    }
    let receive_rate = rows as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    let deadline = start + timing.drain;
    let mut handles = Vec::new();
    for _ in 0..workers {
        let target = Arc::clone(target);
        handles.push(tokio::spawn(async move {
            let (mut processed, mut failed) = (0u64, 0u64);
            while Instant::now() < deadline {
                match target.work_one().await? {
                    Worked::Processed { .. } => processed += 1,
                    Worked::Failed { .. } => failed += 1,
                    Worked::Idle => break,
                }
            }
            Ok::<_, BoxErr>((processed, failed))
        }));
    }
    let (mut processed, mut failed) = (0, 0);
    for handle in handles {
        let (p, f) = handle.await??;
        processed += p;
        failed += f;
    }
    let secs = start.elapsed().as_secs_f64();
    target.applied.fetch_add(processed, Ordering::Relaxed);
    if failed > 0 {
        anomalies.push(format!("the worker's handler failed {failed} times"));
    }
    Ok(Drained {
        received: rows,
        receive_rate,
        processed,
        rate: processed as f64 / secs,
    })
}

const WORKER_HEADER: &str =
    "store     setting                workers    received   receive/s    drained      rows/s";

fn print_worker(store: &str, setting: &str, workers: usize, drained: &Drained) {
    println!(
        "{store:<10}{setting:<22}{workers:>8}{:>12}{:>12}{:>11}{:>12}",
        thousands(drained.received as f64),
        thousands(drained.receive_rate),
        thousands(drained.processed as f64),
        thousands(drained.rate),
    );
}

/// Rows for the worker bench: about what the claim rate fills in one drain.
fn worker_rows(claims_per_sec: f64, timing: &Timing) -> u64 {
    (claims_per_sec * timing.drain.as_secs_f64()).clamp(500.0, 50_000.0) as u64
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens a migrated SQLite store with the ledger, and a raw pool on the same file.
async fn sqlite_target(path: &Path, level: Synchronous) -> Result<Arc<Target>, BoxErr> {
    let options = SqliteOptions::default().synchronous(level);
    let size = 4; // SqliteOptions' default max_connections
    let store = SqliteStore::open(path, options.max_connections(size)).await?;
    store.migrate().await?;
    let mut conn = store.connection().await?;
    diesel::sql_query(
        "CREATE TABLE bench_ledger (account TEXT PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0)",
    )
    .execute(&mut *conn)
    .await?;
    diesel::sql_query(ledger_rows()).execute(&mut *conn).await?;
    drop(conn);
    let pragma = match level {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    let url = path.to_str().ok_or("the bench directory is not UTF-8")?;
    let raw = raw_sqlite_pool(url, pragma, size)?;
    Ok(Arc::new(Target {
        backend: Backend::Sqlite { store, raw },
        applied: Arc::new(AtomicU64::new(0)),
    }))
}

fn ledger_rows() -> String {
    let values: Vec<String> = ACCOUNTS.iter().map(|a| format!("('{a}')")).collect();
    format!(
        "INSERT INTO bench_ledger (account) VALUES {}",
        values.join(", ")
    )
}

/// The Postgres server and the schema this run works in.
struct PgEnv {
    url: String,
    schema: String,
    applied: Arc<AtomicU64>,
}

/// After a failed Postgres row: says so, drops the schema; the caller then skips
/// the remaining Postgres rows.
async fn give_up_on_postgres(env: &PgEnv, err: &BoxErr) {
    println!("postgres: failed, the remaining Postgres rows are skipped: {err}");
    if let Err(err) = env.drop_schema().await {
        println!("postgres: could not drop schema {}: {err}", env.schema);
    }
}

impl PgEnv {
    /// Connects (within 5 s), reads the server's facts, creates the schema with the
    /// hookbox tables and the ledger.
    async fn setup(url: &str) -> Result<(Self, String), BoxErr> {
        let mut conn =
            tokio::time::timeout(Duration::from_secs(5), AsyncPgConnection::establish(url))
                .await
                .map_err(|_| "no connection within 5 s")??;
        let mut facts = Vec::new();
        for setting in ["server_version", "synchronous_commit", "fsync"] {
            let row = diesel::sql_query(format!("SELECT current_setting('{setting}') AS v"))
                .get_result::<TextRow>(&mut conn)
                .await?;
            facts.push(format!("{setting}={}", row.v));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .subsec_nanos();
        let schema = format!("hb_bench_{}_{nanos:09}", std::process::id());
        conn.batch_execute(&format!(
            "CREATE SCHEMA \"{schema}\"; \
             CREATE TABLE \"{schema}\".bench_ledger (account TEXT PRIMARY KEY, \
               balance BIGINT NOT NULL DEFAULT 0); \
             {}",
            ledger_rows().replace("bench_ledger", &format!("\"{schema}\".bench_ledger"))
        ))
        .await?;
        let env = Self {
            url: url.to_string(),
            schema,
            applied: Arc::new(AtomicU64::new(0)),
        };
        let store =
            PgStore::connect(url, PgOptions::new().schema(&env.schema).max_connections(1)).await?;
        store.migrate().await?;
        Ok((env, facts.join(", ")))
    }

    /// A store and a raw pool of `pool` connections each.
    async fn target(&self, pool: usize) -> Result<Arc<Target>, BoxErr> {
        let store = PgStore::connect(
            &self.url,
            PgOptions::new().schema(&self.schema).max_connections(pool),
        )
        .await?;
        let raw = raw_pg_pool(&self.url, &self.schema, pool)?;
        Ok(Arc::new(Target {
            backend: Backend::Pg { store, raw },
            applied: Arc::clone(&self.applied),
        }))
    }

    async fn drop_schema(&self) -> Result<(), BoxErr> {
        let mut conn = AsyncPgConnection::establish(&self.url).await?;
        conn.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.schema
        ))
        .await?;
        Ok(())
    }
}

/// `postgres://user:secret@host:5432/db` as `host:5432/db`.
fn without_credentials(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.rsplit_once('@').map_or(rest, |(_, host)| host)
}

/// The file system type the directory is on, from `/proc/mounts` (Linux).
fn file_system(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            dir.starts_with(point)
                .then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, model)| model.trim().to_string())
}

/// The SQL a claim runs, for the header.
fn statements() -> (String, String) {
    let update = diesel::update(bench_ledger::table.find("acct_00"))
        .set(bench_ledger::balance.eq(bench_ledger::balance + 1));
    let sqlite_update = diesel::debug_query::<Sqlite, _>(&update).to_string();
    let pg_update = diesel::debug_query::<diesel::pg::Pg, _>(&update).to_string();
    let pg_insert = diesel::insert_into(hookbox_processed_keys::table)
        .values((
            hookbox_processed_keys::source.eq("bench"),
            hookbox_processed_keys::provider.eq("standard"),
            hookbox_processed_keys::delivery_id.eq("evt_1"),
        ))
        .on_conflict_do_nothing();
    let pg_insert = diesel::debug_query::<diesel::pg::Pg, _>(&pg_insert).to_string();
    let sqlite_insert = {
        use sqlite_schema::hookbox_processed_keys as keys;
        diesel::insert_into(keys::table)
            .values((
                keys::source.eq("bench"),
                keys::provider.eq("standard"),
                keys::delivery_id.eq("evt_1"),
                keys::received_at.eq(0_i64),
            ))
            .on_conflict_do_nothing()
    };
    let sqlite_insert = diesel::debug_query::<Sqlite, _>(&sqlite_insert).to_string();
    let sql = |s: &str| s.split(" -- binds").next().unwrap_or(s).to_string();
    (
        format!(
            "BEGIN IMMEDIATE; {}; {}; COMMIT",
            sql(&sqlite_insert),
            sql(&sqlite_update)
        ),
        format!("BEGIN; {}; {}; COMMIT", sql(&pg_insert), sql(&pg_update)),
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), BoxErr> {
    let timing = Timing::from_env();
    let mut anomalies = Vec::new();
    let started = Instant::now();

    let base = std::env::var_os("HOOKBOX_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos();
    let dir = TempDir(base.join(format!("hookbox-bench-{}-{nanos:09}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let full = sqlite_target(&dir.0.join("full.db"), Synchronous::Full).await?;
    let normal = sqlite_target(&dir.0.join("normal.db"), Synchronous::Normal).await?;
    let sqlite_version = match &full.backend {
        Backend::Sqlite { raw, .. } => {
            let mut conn = raw.get().await?;
            diesel::sql_query("SELECT sqlite_version() AS v")
                .get_result::<TextRow>(&mut *conn)
                .await?
                .v
        }
        Backend::Pg { .. } => String::new(),
    };

    let url = std::env::var(PG_URL_VAR)
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_PG_URL.to_string());
    let (mut pg, pg_facts) = match PgEnv::setup(&url).await {
        Ok((env, facts)) => (Some(env), facts),
        Err(err) => (
            None,
            format!("unreachable ({err}): the Postgres rows are skipped; set {PG_URL_VAR}"),
        ),
    };

    let (sqlite_sql, pg_sql) = statements();
    println!("hookbox store benchmark: claims per second beside raw diesel-async");
    println!("command:  cargo run --release -p hookbox-bench --bin hookbox-bench-stores");
    println!(
        "machine:  {} CPUs ({}), kernel {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model().unwrap_or_else(|| "unknown CPU".into()),
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".into(), |v| v.trim().to_string()),
    );
    println!(
        "sqlite:   {sqlite_version} (bundled), WAL, files in {} ({})",
        dir.0.display(),
        file_system(&dir.0).unwrap_or_else(|| "file system unknown".into())
    );
    println!("postgres: {}: {pg_facts}", without_credentials(&url));
    println!(
        "timing:   per row, a {} ms warm-up per side, then {} rounds of {} ms per side \
         (H R, R H, H R; with process_once_blocking H B R, R B H, H B R); medians",
        timing.warm.as_millis(),
        timing.rounds,
        timing.round.as_millis()
    );
    println!("sqlite tx:   {sqlite_sql}");
    println!("postgres tx: {pg_sql}");
    println!("pools: sqlite 4 connections (the store's default); postgres = tasks, max 16");

    println!();
    println!("claims/s: process_once of a fresh key + a one-row UPDATE, one transaction each");
    println!(
        "  (sqlite: below each row, process_once_blocking with the same UPDATE in sync diesel, \
         one blocking-pool trip per claim, in the same rounds; then its ratio to process_once)"
    );
    println!("{PAIR_HEADER}");
    let mut sqlite_claims = Vec::new();
    for (target, level) in [(&full, "FULL"), (&normal, "NORMAL")] {
        for tasks in [1, 4] {
            let result = pair(target, SQLITE_TRIO, tasks, None, &timing, &mut anomalies).await?;
            print_pair("sqlite", &format!("synchronous={level}"), tasks, &result);
            print_blocking("sqlite", level, tasks, &result);
            sqlite_claims.push(result);
        }
    }
    let sqlite_dup_keys = Arc::new(
        sqlite_claims
            .as_slice()
            .first()
            .map_or_else(Vec::new, Pair::claimed_keys),
    );
    let sqlite_rate = sqlite_claims
        .as_slice()
        .first()
        .map_or(0.0, Pair::hookbox_median);

    let mut pg_dup_keys = Arc::new(Vec::new());
    let mut pg_rates = Vec::new();
    if let Some(env) = &pg {
        let setting = "pool = tasks";
        let result: Result<(), BoxErr> = async {
            for tasks in [1, 4, 16] {
                let target = env.target(tasks.min(16)).await?;
                let result = pair(&target, PAIR, tasks, None, &timing, &mut anomalies).await?;
                print_pair("postgres", setting, tasks, &result);
                if tasks == 1 {
                    pg_dup_keys = Arc::new(result.claimed_keys());
                }
                pg_rates.push((tasks, result.hookbox_median()));
            }
            Ok(())
        }
        .await;
        if let Err(err) = result {
            give_up_on_postgres(env, &err).await;
            pg = None;
        }
    } else {
        println!("postgres  (skipped: server unreachable)");
    }

    println!();
    println!(
        "duplicates/s: process_once of keys already claimed (BEGIN, INSERT … DO NOTHING, COMMIT)"
    );
    println!("{PAIR_HEADER}");
    if !sqlite_dup_keys.is_empty() {
        let result = pair(
            &full,
            PAIR,
            1,
            Some(&sqlite_dup_keys),
            &timing,
            &mut anomalies,
        )
        .await?;
        print_pair("sqlite", "synchronous=FULL", 1, &result);
    }
    if let Some(env) = &pg {
        let result: Result<(), BoxErr> = async {
            if pg_dup_keys.is_empty() {
                return Ok(());
            }
            for tasks in [1, 16] {
                let target = env.target(tasks).await?;
                let result = pair(
                    &target,
                    PAIR,
                    tasks,
                    Some(&pg_dup_keys),
                    &timing,
                    &mut anomalies,
                )
                .await?;
                print_pair("postgres", "pool = tasks", tasks, &result);
            }
            Ok(())
        }
        .await;
        if let Err(err) = result {
            give_up_on_postgres(env, &err).await;
            pg = None;
        }
    } else {
        println!("postgres  (skipped)");
    }

    println!();
    println!(
        "worker rows/s: Inbox::work_one with the same UPDATE as handler, after receive-ing the \
         rows (4 tasks); drained for up to {} ms",
        timing.drain.as_millis()
    );
    println!("{WORKER_HEADER}");
    let rows = worker_rows(sqlite_rate, &timing);
    let drained = worker_row(&full, 1, rows, &timing, &mut anomalies).await?;
    print_worker("sqlite", "synchronous=FULL", 1, &drained);
    if let Some(env) = &pg {
        let result: Result<(), BoxErr> = async {
            let target = env.target(4).await?;
            for workers in [1, 4] {
                let rate = pg_rates
                    .iter()
                    .find(|(tasks, _)| *tasks == workers)
                    .map_or(0.0, |(_, rate)| *rate);
                let drained = worker_row(
                    &target,
                    workers,
                    worker_rows(rate, &timing),
                    &timing,
                    &mut anomalies,
                )
                .await?;
                print_worker("postgres", "pool 4", workers, &drained);
            }
            Ok(())
        }
        .await;
        if let Err(err) = result {
            println!("postgres: failed, the remaining Postgres rows are skipped: {err}");
        }
    } else {
        println!("postgres  (skipped)");
    }

    println!();
    let mut ledgers = vec![
        ("sqlite FULL", Arc::clone(&full)),
        ("sqlite NORMAL", Arc::clone(&normal)),
    ];
    if let Some(env) = &pg {
        match env.target(1).await {
            Ok(target) => ledgers.push(("postgres", target)),
            Err(err) => println!("postgres: ledger not checked: {err}"),
        }
    }
    for (name, target) in ledgers {
        let total = target.ledger_total().await?;
        let applied = AtomicU64::load(&target.applied, Ordering::Relaxed);
        let verdict = if total == applied as i64 {
            "ok"
        } else {
            "MISMATCH"
        };
        println!("ledger check {name}: sum {total} = {applied} side effects committed: {verdict}");
        if total != applied as i64 {
            anomalies.push(format!("{name}: ledger {total} != {applied} applied"));
        }
    }
    if let Some(env) = &pg {
        match env.drop_schema().await {
            Ok(()) => println!("postgres: schema {} dropped", env.schema),
            Err(err) => println!("postgres: could not drop schema {}: {err}", env.schema),
        }
    }
    for anomaly in &anomalies {
        println!("ANOMALY: {anomaly}");
    }
    println!("total time: {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
