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
//!    (begin / the store's own claim statement, `IdempotencyStore::claim` on the raw
//!    connection: one `INSERT … ON CONFLICT DO NOTHING`, built and cached as the
//!    store builds it / the same `UPDATE` / commit, on a pool built with the store's
//!    settings) and the ratio; the header prints the raw transaction as its
//!    connection ran it;
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
//! an unreachable `HOOKBOX_PG_URL` runs the SQLite rows alone, unless
//! `HOOKBOX_REQUIRE_SERVICES=1`).
#![allow(clippy::print_stdout)] // printing the table is this binary's job

mod measure;
mod target;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hookbox_bench::env::{self, DEFAULT_PG_URL, PG_URL_VAR, TempDir};
use hookbox_bench::rounds::{median, ratio_range};
use hookbox_bench::services::{skipped, without_credentials};
use hookbox_bench::table::{print_anomalies, thousands};
use hookbox_bench::{BoxErr, host};
use hookbox_sqlite::Synchronous;

use measure::{Drained, PAIR, Pair, SQLITE_TRIO, Timing, pair, worker_row, worker_rows};
use target::{PgEnv, sqlite_target};

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

/// Runs the Postgres rows of one table on the run's schema, or prints them as
/// `skipped` when Postgres is gone. After a failure it says so and drops the schema:
/// the later tables skip their Postgres rows.
async fn pg_rows(
    pg: &mut Option<PgEnv>,
    skipped: &str,
    rows: impl AsyncFnOnce(&PgEnv) -> Result<(), BoxErr>,
) {
    let Some(env) = pg.as_ref() else {
        println!("postgres  ({skipped})");
        return;
    };
    if let Err(err) = rows(env).await {
        println!("postgres: failed, the remaining Postgres rows are skipped: {err}");
        if let Err(err) = env.schema.drop_schema().await {
            println!("postgres: could not drop schema {}: {err}", env.schema.name);
        }
        *pg = None;
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), BoxErr> {
    let timing = Timing::from_env();
    let mut anomalies = Vec::new();
    let started = Instant::now();

    let dir = TempDir::new("hookbox-bench-")?;
    let full = sqlite_target(&dir.path().join("full.db"), Synchronous::Full).await?;
    let normal = sqlite_target(&dir.path().join("normal.db"), Synchronous::Normal).await?;
    let sqlite_version = full.sqlite_version().await?;

    let url = env::var_or(PG_URL_VAR, DEFAULT_PG_URL);
    let (mut pg, pg_facts) = match PgEnv::setup(&url).await {
        Ok((env, facts)) => (Some(env), facts),
        Err(err) => (None, skipped("Postgres", &url, PG_URL_VAR, &err)?),
    };

    let sqlite_sql = full.transaction_sql().await?;
    let pg_sql = match &pg {
        Some(env) => match env.target(1).await {
            Ok(target) => target.transaction_sql().await,
            Err(err) => Err(err),
        },
        None => Err("the server is unreachable".into()),
    }
    .unwrap_or_else(|err| format!("(not recorded: {err})"));
    println!("hookbox store benchmark: claims per second beside raw diesel-async");
    println!("command:  cargo run --release -p hookbox-bench --bin hookbox-bench-stores");
    println!(
        "machine:  {} CPUs ({}), kernel {}",
        host::cpus(),
        host::cpu_model(),
        host::kernel(),
    );
    println!(
        "sqlite:   {sqlite_version} (bundled), WAL, files in {} ({})",
        dir.path().display(),
        host::file_system(dir.path()).unwrap_or_else(|| "file system unknown".into())
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
    pg_rows(&mut pg, "skipped: server unreachable", async |env| {
        for tasks in [1, 4, 16] {
            let target = env.target(tasks).await?;
            let result = pair(&target, PAIR, tasks, None, &timing, &mut anomalies).await?;
            print_pair("postgres", "pool = tasks", tasks, &result);
            if tasks == 1 {
                pg_dup_keys = Arc::new(result.claimed_keys());
            }
            pg_rates.push((tasks, result.hookbox_median()));
        }
        Ok(())
    })
    .await;

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
    pg_rows(&mut pg, "skipped", async |env| {
        if pg_dup_keys.is_empty() {
            return Ok(());
        }
        for tasks in [1, 16] {
            let target = env.target(tasks).await?;
            let keys = Some(&pg_dup_keys);
            let result = pair(&target, PAIR, tasks, keys, &timing, &mut anomalies).await?;
            print_pair("postgres", "pool = tasks", tasks, &result);
        }
        Ok(())
    })
    .await;

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
    pg_rows(&mut pg, "skipped", async |env| {
        let target = env.target(4).await?;
        for workers in [1, 4] {
            let rate = pg_rates
                .iter()
                .find(|(tasks, _)| *tasks == workers)
                .map_or(0.0, |(_, rate)| *rate);
            let rows = worker_rows(rate, &timing);
            let drained = worker_row(&target, workers, rows, &timing, &mut anomalies).await?;
            print_worker("postgres", "pool 4", workers, &drained);
        }
        Ok(())
    })
    .await;

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
        let schema = &env.schema;
        match schema.drop_schema().await {
            Ok(()) => println!("postgres: schema {} dropped", schema.name),
            Err(err) => println!("postgres: could not drop schema {}: {err}", schema.name),
        }
    }
    print_anomalies(&anomalies);
    println!("total time: {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
