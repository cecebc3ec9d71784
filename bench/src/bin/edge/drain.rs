//! The worker alone: how many rows per second `run_worker_with` drains from a filled
//! inbox when each handler inserts one ledger row, batched (the default
//! [`BatchLimits`]) against per-row ([`BatchLimits::per_row`], one row per
//! transaction, the worker before batches) on the same store, in alternating rounds
//! (batched, per-row, per-row, batched).
//!
//! Each round stores fresh deliveries through `Inbox::receive` (64 concurrent calls,
//! not timed), then starts the worker and times it from its start until the store
//! reports no pending row (polled every [`POLL`] once the handler has succeeded for
//! every row: the store's counts are a scan of the inbox, which would slow the drain). Afterwards the ledger must hold one
//! line per processed row and the worker must have failed none: a mismatch fails the
//! run. `mean_batch` is the rows processed over the worker's transactions.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use diesel::sql_types::BigInt;
use diesel::{ExpressionMethods as _, QueryableByName};
use diesel_async::RunQueryDsl as _;
use hookbox_bench::BoxErr;
use hookbox_bench::table::thousands;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{BatchLimits, Delivery, HandlerError, Inbox, InboxAdmin, WorkerOptions};
use hookbox_diesel_mysql::MysqlStore;
use hookbox_diesel_mysql::diesel_async::AsyncMysqlConnection;
use hookbox_diesel_pg::PgStore;
use hookbox_diesel_pg::diesel_async::AsyncPgConnection;
use hookbox_sqlite::SqliteStore;

use crate::Ctx;

/// Rows a batched round drains (`HOOKBOX_BENCH_DRAIN_ROWS`); a per-row round drains
/// a quarter as many, since it is several times slower.
const DEFAULT_DRAIN_ROWS: usize = 20_000;
/// How often the drain's end is looked for.
const POLL: Duration = Duration::from_millis(50);
/// Concurrent `Inbox::receive` calls that fill the inbox before a round.
const FILLERS: usize = 64;
/// A round that has not drained by then fails the run.
const DRAIN_LIMIT: Duration = Duration::from_secs(120);

const LEDGER: &str = "CREATE TABLE IF NOT EXISTS bench_ledger \
    (delivery_id TEXT NOT NULL, applied_at BIGINT NOT NULL)";

diesel::table! {
    /// The ledger a handler writes one line to per delivery: a query builder insert,
    /// so that its prepared statement is cached as an application's would be.
    bench_ledger (delivery_id) {
        delivery_id -> Text,
        applied_at -> BigInt,
    }
}
const COUNT: &str = "SELECT COUNT(*) AS n FROM bench_ledger";

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Handler runs that succeeded this round (some may still roll back with their
/// batch): the drain's end is looked for in the store only once this reaches the
/// round's rows, so the polling costs the database nothing while the worker runs.
static SUCCEEDED: AtomicU64 = AtomicU64::new(0);

/// Defines `$name`, the handler on `$conn`: one ledger row, in the worker's
/// transaction (the same query-builder insert on every store).
macro_rules! ledger_handler {
    ($(#[$doc:meta])* $name:ident, $conn:ty) => {
        $(#[$doc])*
        pub(crate) async fn $name(conn: &mut $conn, delivery: &Delivery) -> Result<(), HandlerError> {
            diesel::insert_into(bench_ledger::table)
                .values((
                    bench_ledger::delivery_id.eq(delivery.delivery_id()),
                    bench_ledger::applied_at.eq(OffsetDateTime::now_utc().unix_timestamp()),
                ))
                .execute(conn)
                .await?;
            SUCCEEDED.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    };
}

ledger_handler!(
    /// The handler on SQLite.
    sqlite_ledger,
    hookbox_sqlite::Conn
);
ledger_handler!(
    /// The handler on Postgres.
    pg_ledger,
    AsyncPgConnection
);
ledger_handler!(
    /// The handler on MySQL.
    mysql_ledger,
    AsyncMysqlConnection
);

/// A store with the bench's ledger table beside its inbox.
pub(crate) trait LedgerStore: Inbox + InboxAdmin + Clone + Send + Sync + 'static {
    /// Creates the ledger table.
    fn create_ledger(&self) -> impl Future<Output = Result<(), BoxErr>> + Send;
    /// Lines in the ledger.
    fn ledger_lines(&self) -> impl Future<Output = Result<u64, BoxErr>> + Send;
}

/// Implements [`LedgerStore`] for `$store` (each store hands out its own pooled
/// connection type, so one impl per store).
macro_rules! ledger_store {
    ($store:ty) => {
        impl LedgerStore for $store {
            async fn create_ledger(&self) -> Result<(), BoxErr> {
                diesel::sql_query(LEDGER)
                    .execute(&mut *self.connection().await?)
                    .await?;
                Ok(())
            }

            async fn ledger_lines(&self) -> Result<u64, BoxErr> {
                let count = diesel::sql_query(COUNT)
                    .get_result::<Count>(&mut *self.connection().await?)
                    .await?;
                Ok(u64::try_from(count.n)?)
            }
        }
    };
}

ledger_store!(SqliteStore);
ledger_store!(PgStore);
ledger_store!(MysqlStore);

/// Batched or per-row.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Batched,
    PerRow,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Batched => "batched",
            Self::PerRow => "per-row",
        }
    }

    fn limits(self) -> BatchLimits {
        match self {
            Self::Batched => BatchLimits::default(),
            Self::PerRow => BatchLimits::per_row(),
        }
    }
}

/// One drained round.
struct Round {
    mode: Mode,
    rows: u64,
    elapsed: Duration,
    batches: u64,
}

/// Prints the section's header.
pub(crate) fn print_header() {
    println!(
        "worker alone: rows filled through Inbox::receive first, then run_worker_with until \
         none is pending; the handler inserts one ledger row in the worker's transaction"
    );
    println!(
        "{:<26} {:<10} {:>11} {:>8} {:>11} {:>10} {:>9}",
        "target", "mode", "concurrency", "rows", "rows/s", "mean_batch", "seconds"
    );
}

impl Ctx {
    /// The worker-alone rows on `store`: batched and per-row in alternating rounds,
    /// then the ratio. `handler` inserts one ledger row.
    pub(crate) fn drain_section<S, H>(
        &self,
        name: &'static str,
        store: S,
        handler: H,
    ) -> Result<(), BoxErr>
    where
        S: LedgerStore,
        H: hookbox_core::Handler<S::Conn> + Copy + 'static,
    {
        let rows = std::env::var("HOOKBOX_BENCH_DRAIN_ROWS")
            .ok()
            .map(|v| v.parse::<usize>())
            .transpose()?
            .unwrap_or(DEFAULT_DRAIN_ROWS);
        self.server_rt.block_on(store.create_ledger())?;
        // the store's default unless HOOKBOX_BENCH_WORKER_CONCURRENCY says otherwise
        let concurrency = match std::env::var("HOOKBOX_BENCH_WORKER_CONCURRENCY") {
            Ok(value) => value.parse::<u32>()?.max(1),
            Err(_) => store.worker_concurrency(),
        };
        let mut rounds = Vec::new();
        for mode in [Mode::Batched, Mode::PerRow, Mode::PerRow, Mode::Batched] {
            let n = if mode == Mode::Batched {
                rows
            } else {
                rows / 4
            };
            let round = self.drain_round(&store, handler, mode, concurrency, n.max(1))?;
            let seconds = round.elapsed.as_secs_f64();
            let rate = round.rows as f64 / seconds;
            let mean_batch = round.rows as f64 / round.batches.max(1) as f64;
            println!(
                "{:<26} {:<10} {concurrency:>11} {:>8} {:>11} {mean_batch:>10.1} {seconds:>9.2}",
                format!("{name} worker"),
                mode.as_str(),
                thousands(round.rows as f64),
                thousands(rate),
            );
            self.table.json_line(serde_json::json!({
                "row": "worker",
                "store": name,
                "mode": mode.as_str(),
                "concurrency": concurrency,
                "rows": round.rows,
                "rows_per_s": rate,
                "mean_batch": mean_batch,
                "seconds": seconds,
            }));
            rounds.push(round);
        }
        let mean_rate = |mode: Mode| {
            let (rows, secs) = rounds
                .iter()
                .filter(|r| r.mode == mode)
                .fold((0u64, 0f64), |(rows, secs), r| {
                    (rows + r.rows, secs + r.elapsed.as_secs_f64())
                });
            rows as f64 / secs
        };
        let (batched, per_row) = (mean_rate(Mode::Batched), mean_rate(Mode::PerRow));
        println!(
            "{:<26} batched {}/s, per-row {}/s over both rounds: {:.1}x (targets: >= 10,000 \
             rows/s, >= 5x per-row)",
            format!("{name} worker"),
            thousands(batched),
            thousands(per_row),
            batched / per_row,
        );
        self.table.json_line(serde_json::json!({
            "row": "worker-ratio",
            "store": name,
            "batched_rows_per_s": batched,
            "per_row_rows_per_s": per_row,
            "ratio": batched / per_row,
        }));
        Ok(())
    }

    /// Fills `store` with `n` fresh deliveries, then times the worker draining them.
    fn drain_round<S, H>(
        &self,
        store: &S,
        handler: H,
        mode: Mode,
        concurrency: u32,
        n: usize,
    ) -> Result<Round, BoxErr>
    where
        S: LedgerStore,
        H: hookbox_core::Handler<S::Conn> + 'static,
    {
        let deliveries = self.verified_fresh(n)?;
        let lines_before = self.server_rt.block_on(store.ledger_lines())?;
        self.server_rt.block_on(fill(store, deliveries))?;
        let before = self.server_rt.block_on(store.stats())?;
        if before.pending < n as u64 {
            return Err(format!("{} pending after storing {n}", before.pending).into());
        }

        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker_store = store.clone();
        let options = WorkerOptions::default()
            .idle(POLL)
            .batch(mode.limits())
            .concurrency(concurrency);
        SUCCEEDED.store(0, Ordering::Relaxed);
        let started = Instant::now();
        let worker = self.server_rt.spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            hookbox_core::run_worker_with(&worker_store, handler, options, shutdown).await
        });
        let elapsed = self.server_rt.block_on(async {
            loop {
                tokio::time::sleep(POLL).await;
                if AtomicU64::load(&SUCCEEDED, Ordering::Relaxed) < n as u64
                    && started.elapsed() <= DRAIN_LIMIT
                {
                    continue;
                }
                let stats = store.stats().await?;
                if stats.pending == 0 {
                    return Ok::<_, BoxErr>(started.elapsed());
                }
                if started.elapsed() > DRAIN_LIMIT {
                    return Err(format!(
                        "{} rows still pending after {} s",
                        stats.pending,
                        DRAIN_LIMIT.as_secs()
                    )
                    .into());
                }
            }
        });
        let _ = stop.send(());
        let report = self.server_rt.block_on(worker)??;
        let elapsed = elapsed?;
        let lines = self.server_rt.block_on(store.ledger_lines())? - lines_before;
        if report.failed > 0 || report.dead > 0 {
            return Err(format!(
                "the {} worker failed {} rows ({} dead)",
                mode.as_str(),
                report.failed,
                report.dead
            )
            .into());
        }
        if lines != n as u64 || report.processed != n as u64 {
            return Err(format!(
                "{n} rows stored, {} processed, {lines} ledger lines: not one line per row",
                report.processed
            )
            .into());
        }
        Ok(Round {
            mode,
            rows: report.processed,
            elapsed,
            batches: report.batches,
        })
    }
}

/// Stores `deliveries` through `Inbox::receive`, [`FILLERS`] at a time.
async fn fill<S: Inbox + Clone + Send + Sync + 'static>(
    store: &S,
    deliveries: Vec<Arc<hookbox_core::VerifiedDelivery>>,
) -> Result<(), BoxErr> {
    let queue = Arc::new(std::sync::Mutex::new(deliveries));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..FILLERS {
        let (store, queue) = (store.clone(), Arc::clone(&queue));
        tasks.spawn(async move {
            loop {
                let next = queue.lock().map_err(|_| "poisoned")?.pop();
                let Some(delivery) = next else {
                    return Ok::<_, BoxErr>(());
                };
                store
                    .receive(&delivery)
                    .await
                    .map_err(|err| hookbox_core::error_chain(&err))?;
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(())
}
