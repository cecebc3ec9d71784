//! The server mode: the seed's delivery stream replayed with real concurrency on
//! Postgres or on MySQL/MariaDB.
//!
//! The single-process run ([`run`](crate::run)) can only interleave two copies of a
//! delivery at one `await`; the seed itself says that relying on the unique index
//! "across several workers" is what it could not exercise. This mode replays the same
//! seed, events and delivery stream (groups in time order, concurrent copies,
//! shuffles, lost acks and retries after a 5xx, with the same keyed draws) against a
//! real server (the URL's scheme picks which):
//!
//! - **Handlers.** Each delivery is handed to one of `workers` tasks, each on its own
//!   connection; the copies of a concurrent group are dispatched at the same moment
//!   to different workers. (b) check-then-insert is the script's shape on plain SQL,
//!   (c) is the store's [`process_once`](hookbox_core::IdempotencyStore::process_once)
//!   ([`PgStore`](hookbox_diesel_pg::PgStore) or
//!   [`MysqlStore`](hookbox_diesel_mysql::MysqlStore)) with the side effect in its
//!   transaction, (d) adds
//!   [`VersionGuard::advance`](hookbox_core::VersionGuard::advance) for plan events.
//!   Every handler gets a fresh schema (a database on MySQL) with the script's
//!   tables, and the table is counted from its rows.
//! - **Crashes.** The script's crash experiment with real processes: `workers` worker
//!   processes (the binary given as [`SimOptions::worker_exe`], run with
//!   [`WORKER_SUBCOMMAND`]) stop after the dedupe insert and before the side effect;
//!   the parent lets them go on or SIGKILLs them and starts a fresh one, and the
//!   sender retries the delivery.
//!
//! Real concurrency is not deterministic, so the numbers are measured, not fixed:
//! what must hold (and what `hookbox-cli`'s test checks) is that (c) and (d) apply
//! every event exactly once and that the atomic crash design loses nothing.
//!
//! The replay, the crash test and the worker are written once over a `Backend`
//! (the store, its connections and namespaces) and the script's statements in
//! diesel's query builder; `pg` and `mysql` hold what differs: the tables' types,
//! how a namespace is created and dropped, the ledger's cast.

mod backend;
mod crash;
mod handlers;
mod mysql;
mod namespace;
mod options;
mod pg;
mod worker;

use std::io::{self, Write};
use std::time::{Duration, Instant};

pub use options::{DEFAULT_IO_DELAY, DEFAULT_WORKERS, SimOptions};
pub use worker::{CrashDesign, WORKER_SUBCOMMAND, WORKER_URL_ENV, run_worker};

use crate::seed::{
    Kind, N_ACCOUNTS, N_EVENTS, P_ACK_LOST, P_CONCURRENT, P_DUPLICATE, P_SHUFFLE, SEED,
    SHUFFLE_WINDOW, Stream,
};
use crate::table::{write_crash_header, write_crash_row, write_handler_header, write_handler_row};
use backend::Backend;
use handlers::Handler;
use mysql::Mysql;
use namespace::Schemas;
use pg::Postgres;

/// The servers the mode runs on, told apart by the URL's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Postgres,
    Mysql,
}

/// Reads the server from `url`'s scheme.
fn server(url: &str) -> io::Result<Server> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Server::Postgres)
    } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        Ok(Server::Mysql)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the server mode takes a postgres:// or mysql:// URL",
        ))
    }
}

/// Replays the stream on the server `options.url` names (Postgres, or MySQL and
/// MariaDB) and prints a header, the handler table and the crash table, with the
/// same columns and layout as the single-process run. Returns the elapsed time of
/// each section, in order.
///
/// Every schema (database, on MySQL) it creates is dropped before it returns, also
/// when it fails.
///
/// # Errors
/// Invalid options (fewer than 2 workers, a URL of another scheme), the server
/// unreachable or failing, a worker process that cannot be started or breaks the
/// protocol, or writing to `out`.
pub fn run(out: &mut impl Write, options: &SimOptions) -> io::Result<Vec<(String, Duration)>> {
    if options.workers < 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the server mode needs at least 2 workers: concurrent copies meet on two connections",
        ));
    }
    match server(&options.url)? {
        Server::Postgres => run_on::<Postgres>(out, options),
        Server::Mysql => run_on::<Mysql>(out, options),
    }
}

fn run_on<B: Backend>(
    out: &mut impl Write,
    options: &SimOptions,
) -> io::Result<Vec<(String, Duration)>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let schemas = Schemas::<B>::new(&options.url);
    let result = runtime.block_on(sections(out, options, &schemas));
    // also after a failure: every pool, task and worker process of the run is gone
    // by now, so nothing holds the schemas
    let dropped = runtime.block_on(schemas.drop_all());
    let mut timings = result?;
    timings.push((format!("drop {}", B::NAMESPACES), dropped?));
    Ok(timings)
}

async fn sections<B: Backend>(
    out: &mut impl Write,
    options: &SimOptions,
    schemas: &Schemas<B>,
) -> io::Result<Vec<(String, Duration)>> {
    let mut timings = Vec::new();
    let t0 = Instant::now();
    let limit = options.events.unwrap_or(N_EVENTS).clamp(1, N_EVENTS);
    let stream = Stream::new(limit);
    timings.push(("events and delivery stream".to_string(), t0.elapsed()));

    let server = B::server_version(&options.url).await?;
    let name = B::NAME;
    let n_credit = stream
        .events
        .iter()
        .filter(|e| e.kind == Kind::Credit)
        .count();
    let ties = stream.events.iter().filter(|e| e.tie).count();
    let scheduled: u32 = stream.groups.iter().map(|g| g.copies).sum();
    let pairs = stream.groups.iter().filter(|g| g.copies == 2).count();
    let crash_events = limit.min(crash::N_EVENTS);
    let w = options.workers;

    writeln!(
        out,
        "webhook-sim on {name} (real concurrency, synthetic data: measured, not deterministic)"
    )?;
    writeln!(out, "seed: {SEED}")?;
    writeln!(out, "{}: {server}", name.to_lowercase())?;
    writeln!(
        out,
        "workers: {w} (handlers: {w} deliveries at a time on {w} connections, (b) keeping one per worker, (c)/(d) sharing a pool of {w}; crash test: {w} worker processes, one connection each)"
    )?;
    writeln!(
        out,
        "io delay: {} ms (tokio::time::sleep at the script's `await io()`: (b) between its check and its write, (c)/(d) before the transaction)",
        options.io_delay.as_secs_f64() * 1e3
    )?;
    writeln!(
        out,
        "{}: {}_* (one per handler and crash design, dropped at the end)",
        B::NAMESPACES,
        schemas.prefix()
    )?;
    // a prefix says so: "events: 300 of 10000 (…)"
    let of = if limit < N_EVENTS {
        format!(" of {N_EVENTS}")
    } else {
        String::new()
    };
    writeln!(
        out,
        "events: {limit}{of} ({n_credit} credit, {} plan), accounts: {N_ACCOUNTS}, same-second plan pairs: {ties}",
        limit - n_credit
    )?;
    writeln!(
        out,
        "deliveries scheduled: {scheduled} in {} groups ({pairs} concurrent pairs), before retries",
        stream.groups.len()
    )?;
    writeln!(
        out,
        "chances per delivery: duplicate {P_DUPLICATE}, response lost after commit {P_ACK_LOST}, concurrent redelivery {P_CONCURRENT}, shuffled {P_SHUFFLE} (window {SHUFFLE_WINDOW})"
    )?;

    let mut rows = Vec::new();
    for handler in Handler::ALL {
        let t0 = Instant::now();
        let schema = schemas.create(handler.schema_suffix()).await?;
        rows.push(handlers::replay(handler, &stream, options, &schema).await?);
        timings.push((
            format!("{} handler {}", B::TAG, handler.name()),
            t0.elapsed(),
        ));
    }
    writeln!(
        out,
        "\n== handlers ({name}, {w} workers on {w} connections, io delay {} ms)",
        options.io_delay.as_secs_f64() * 1e3
    )?;
    write_handler_header(out)?;
    for r in &rows {
        write_handler_row(out, r)?;
    }

    writeln!(
        out,
        "\n== crash after dedupe insert, before side effect ({name}, {w} worker processes, SIGKILL, chance {} per delivery)",
        crash::P_CRASH
    )?;
    write_crash_header(out)?;
    for design in [CrashDesign::Split, CrashDesign::Atomic] {
        let t0 = Instant::now();
        let schema = schemas.create(design.as_str()).await?;
        let r = crash::run(design, crash_events, options, &schema).await?;
        timings.push((
            format!("{} crash {}", B::TAG, design.as_str()),
            t0.elapsed(),
        ));
        write_crash_row(out, design.label(), &r)?;
    }
    Ok(timings)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
mod tests {
    use hookbox_diesel_pg::diesel;
    use hookbox_diesel_pg::diesel::sql_types::Text;
    use hookbox_diesel_pg::diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};

    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn pg_url() -> Option<String> {
        block_on(hookbox_diesel_pg::testing::pg_url())
    }

    /// Runs a sim whose crash test cannot start its workers and returns the run's
    /// prefix, from its header line `<namespaces>: <prefix>_* …`.
    fn failed_run_prefix(url: &str, namespaces: &str) -> String {
        let mut options = SimOptions::new(url, "/nonexistent/hookbox");
        options.events = Some(20);
        let mut out = Vec::new();
        let err = run(&mut out, &options).unwrap_err();
        assert!(err.to_string().contains("starting the worker"), "{err}");
        let out = String::from_utf8(out).unwrap();
        let start = format!("{namespaces}: ");
        out.lines()
            .find_map(|l| l.strip_prefix(start.as_str()))
            .and_then(|l| l.split("_* ").next())
            .unwrap()
            .to_string()
    }

    #[test]
    fn one_worker_is_refused_before_connecting() {
        let mut options = SimOptions::new("postgres://nobody@127.0.0.1:1/none", "hookbox");
        options.workers = 1;
        let err = run(&mut Vec::new(), &options).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_url_of_another_scheme_is_refused_before_connecting() {
        let options = SimOptions::new("sqlite://webhooks.db", "hookbox");
        let err = run(&mut Vec::new(), &options).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(server("mariadb://root@db/test").unwrap(), Server::Mysql);
        assert_eq!(server("postgresql://db/test").unwrap(), Server::Postgres);
    }

    #[test]
    fn a_failed_run_on_mysql_still_drops_its_databases() {
        let Some(url) = block_on(hookbox_diesel_mysql::testing::mysql_url()) else {
            return;
        };
        let prefix = failed_run_prefix(&url, "databases");
        #[derive(diesel::QueryableByName)]
        struct Name {
            #[diesel(sql_type = Text)]
            name: String,
        }
        let names = block_on(async {
            let store = hookbox_diesel_mysql::MysqlStore::connect(
                &url,
                hookbox_diesel_mysql::MysqlOptions::new().with_max_connections(1),
            )
            .await
            .unwrap();
            let mut conn = store.connection().await.unwrap();
            diesel::sql_query("SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA")
                .load::<Name>(&mut *conn)
                .await
                .unwrap()
        });
        let left: Vec<_> = names
            .into_iter()
            .filter(|n| n.name.starts_with(&prefix))
            .map(|n| n.name)
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn a_failed_run_still_drops_its_schemas() {
        let Some(url) = pg_url() else { return };
        let prefix = failed_run_prefix(&url, "schemas");
        #[derive(diesel::QueryableByName)]
        struct Name {
            #[diesel(sql_type = Text)]
            nspname: String,
        }
        let names = block_on(async {
            let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
            diesel::sql_query("SELECT nspname FROM pg_namespace")
                .load::<Name>(&mut conn)
                .await
                .unwrap()
        });
        let left: Vec<_> = names
            .into_iter()
            .filter(|n| n.nspname.starts_with(&prefix))
            .map(|n| n.nspname)
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}
