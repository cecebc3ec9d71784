//! The plumbing every hookbox example shares: choosing the store, the optional Redis
//! front cache, the migrations and the example's table, the endpoint, the worker
//! beside it, graceful shutdown and logging. Each example's `main.rs` keeps only what
//! is its own: the provider, its demo secret, its table and its handler.
//!
//! What [`run`] does, in order:
//!
//! 1. logs on stderr (`tracing-subscriber`), so stdout's first line is the address;
//! 2. opens the store named by `HOOKBOX_STORE`: a SQLite file (the example's
//!    [`Example::default_db`] when unset), or PostgreSQL for a `postgres://` URL;
//!    migrates it and creates the example's table ([`Example::create_table`]);
//! 3. builds the provider from `WEBHOOK_SECRET` (the example's
//!    [`Example::demo_secret`] when unset) and serves `POST` [`Example::path`] on
//!    `127.0.0.1:$PORT` (3000 by default), printing `listening on http://…`; with
//!    `HOOKBOX_REDIS_URL` set, duplicates are answered from Redis first;
//! 4. runs the worker beside the server: for every stored delivery it calls the
//!    example's handler and runs the [`Statement`] it returns on the inbox row's
//!    transaction, so the statement commits with the row's `processed_at` or not at
//!    all;
//! 5. on Ctrl-C, finishes the request and the row in progress, then stops.
//!
//! [`run_as`] does the same for one [`Mode`]: the receiver only, the worker only, or
//! both, so the two can run as separate processes on one database.
//!
//! # Copying an example
//! Copy the example's `main.rs`, and this file as a module of your crate, then drop
//! what you do not need: on one database only, keep that branch of the store choice in
//! `start`; the [`Statement`] trait then reduces to the one backend's `QueryFragment`.
//! For several statements per delivery, replace the closure in `start` that calls
//! `apply` with your own `|conn, row| Box::pin(async move { … })`: it gets the row's
//! connection, inside that transaction. Without the process modes, drop [`Mode`] and
//! [`run_as`].
//!
//! # Examples
//! ```no_run
//! use hookbox_core::StoredDelivery;
//! use hookbox_example_kit::{Error, Example, Statement};
//! use hookbox_github::GitHub;
//! use hookbox_sqlite::diesel;
//!
//! fn count(_row: &StoredDelivery) -> Result<Option<impl Statement>, Error> {
//!     Ok(Some(diesel::sql_query("UPDATE hits SET n = n + 1")))
//! }
//!
//! # async fn main_() -> Result<(), Error> {
//! let example = Example {
//!     provider: GitHub::new,
//!     demo_secret: "a-demo-secret",
//!     path: "/webhooks/github",
//!     create_table: "CREATE TABLE IF NOT EXISTS hits (n BIGINT NOT NULL)",
//!     default_db: "hookbox-hits.db",
//!     log: hookbox_example_kit::log!(),
//! };
//! hookbox_example_kit::run(example, count).await
//! # }
//! ```
#![allow(clippy::print_stdout)] // the "listening on" line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{Webhook, axum};
use hookbox_core::{
    Inbox, Provider, RetentionPolicy, StoredDelivery, VerifyError, WorkerReport, run_worker,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_redis_cache::{CacheOptions, Cached};
use hookbox_sqlite::diesel::pg::Pg;
use hookbox_sqlite::diesel::query_builder::{QueryFragment, QueryId};
use hookbox_sqlite::diesel::sqlite::Sqlite;
use hookbox_sqlite::diesel_async::methods::ExecuteDsl;
use hookbox_sqlite::diesel_async::{AsyncConnectionCore, RunQueryDsl as _};
use hookbox_sqlite::{SqliteOptions, SqliteStore, diesel};
use tokio::sync::watch;

#[doc(hidden)]
pub use tracing; // for `log!`, which expands in the example's crate

/// The error every example returns: anything, sent across threads.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A statement either backend (SQLite, PostgreSQL) can run.
pub trait Statement: QueryFragment<Sqlite> + QueryFragment<Pg> + QueryId + Send {}
impl<T: QueryFragment<Sqlite> + QueryFragment<Pg> + QueryId + Send> Statement for T {}

/// A worker's handler: reads a stored delivery and returns the statement to run on
/// the row's transaction, `None` when the delivery needs nothing (the worker marks it
/// processed all the same), or an error (rolled back; the worker retries the row,
/// then dead-letters it).
///
/// Implemented by every `fn(&StoredDelivery) -> Result<Option<impl Statement>, Error>`.
pub trait Handler<'a>: Fn(&'a StoredDelivery) -> Result<Option<Self::Statement>, Error> {
    /// The statement the handler returns.
    type Statement: Statement;
}

impl<'a, F, Q> Handler<'a> for F
where
    F: Fn(&'a StoredDelivery) -> Result<Option<Q>, Error>,
    Q: Statement,
{
    type Statement = Q;
}

/// What makes one example: its provider, its secret, its path and its table.
#[derive(Clone, Copy, Debug)]
pub struct Example<P> {
    /// Builds the provider from the signing secret, e.g. `GitHub::new`.
    pub provider: fn(String) -> Result<P, VerifyError>,
    /// The signing secret when `WEBHOOK_SECRET` is unset or empty.
    pub demo_secret: &'static str,
    /// The endpoint's path, e.g. `/webhooks/github`.
    pub path: &'static str,
    /// The `CREATE TABLE IF NOT EXISTS …` of the table the handler writes to, in SQL
    /// both backends read.
    pub create_table: &'static str,
    /// The SQLite file when `HOOKBOX_STORE` is unset or empty.
    pub default_db: &'static str,
    /// The example's log lines; write [`log!()`](log!).
    pub log: Log,
}

/// The lines the kit logs, under the example's own target (`INFO example_github:
/// applied once …`): build it with [`log!()`](log!) in the example's crate.
#[derive(Clone, Copy, Debug)]
pub struct Log {
    /// `applied once`, with the row's key and event type, after its statement ran.
    pub applied: fn(&StoredDelivery),
    /// `worker started`, in a process started with a [`Mode`].
    pub worker_started: fn(),
    /// `stopped`, with the worker's counts, after Ctrl-C.
    pub stopped: fn(&WorkerReport),
}

/// The [`Log`] of the crate this is written in: its lines carry that crate's target.
#[macro_export]
macro_rules! log {
    () => {
        $crate::Log {
            applied: |row| {
                $crate::tracing::info!(
                    key = %row.key,
                    event = row.event_type,
                    "applied once"
                )
            },
            worker_started: || $crate::tracing::info!("worker started"),
            stopped: |report| {
                $crate::tracing::info!(processed = report.processed, dead = report.dead, "stopped")
            },
        }
    };
}

/// What a process runs: the receiver and the worker, or one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The receiver and the worker in one process (`serve`, or no arguments).
    Both,
    /// The receiver only (`serve --no-worker`).
    Receiver,
    /// The worker only: drains the inbox, no HTTP (`worker`).
    Worker,
}

impl Mode {
    /// Reads the mode from the command line; on anything else, prints `usage` to
    /// stderr and exits with status 2.
    #[must_use]
    pub fn from_args(usage: &str) -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            [] | ["serve"] => Self::Both,
            ["serve", "--no-worker"] => Self::Receiver,
            ["worker"] => Self::Worker,
            _ => {
                eprintln!("{usage}");
                std::process::exit(2);
            }
        }
    }
}

/// Serves the example's endpoint and runs its worker with `handler` until Ctrl-C.
///
/// # Errors
/// When the store, the secret, the Redis URL or the port is unusable, or the server or
/// the worker fails.
pub async fn run<P, H>(example: Example<P>, handler: H) -> Result<(), Error>
where
    P: Provider + 'static,
    H: for<'a> Handler<'a> + Send + Sync + 'static,
{
    start(example, None, handler).await
}

/// Runs the example's receiver, its worker with `handler`, or both, as `mode` says,
/// until Ctrl-C. Logs `worker started` when it runs the worker.
///
/// # Errors
/// As [`run`].
pub async fn run_as<P, H>(mode: Mode, example: Example<P>, handler: H) -> Result<(), Error>
where
    P: Provider + 'static,
    H: for<'a> Handler<'a> + Send + Sync + 'static,
{
    start(example, Some(mode), handler).await
}

/// Opens the store, creates the table and runs; `mode` is `None` for a plain [`run`].
async fn start<P, H>(example: Example<P>, mode: Option<Mode>, handler: H) -> Result<(), Error>
where
    P: Provider + 'static,
    H: for<'a> Handler<'a> + Send + Sync + 'static,
{
    // logs on stderr, so stdout's first line is the address
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let log = example.log;
    let url = env_or("HOOKBOX_STORE", example.default_db);
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PgStore::connect(&url, PgOptions::new()).await?;
        store.migrate().await?;
        diesel::sql_query(example.create_table)
            .execute(&mut *store.connection().await?)
            .await?;
        let retention = store.options().get_retention().clone();
        serve(store, retention, &example, mode, move |conn, row| {
            let statement = handler(row);
            Box::pin(async move { apply(conn, row, statement?, log).await })
        })
        .await
    } else {
        let store = SqliteStore::open(&url, SqliteOptions::default()).await?;
        store.migrate().await?;
        diesel::sql_query(example.create_table)
            .execute(&mut *store.connection().await?)
            .await?;
        let retention = store.options().retention_policy().clone();
        serve(store, retention, &example, mode, move |conn, row| {
            let statement = handler(row);
            Box::pin(async move { apply(conn, row, statement?, log).await })
        })
        .await
    }
}

/// Runs `statement` on the inbox row's transaction: it commits together with the row's
/// `processed_at`, so neither a crash nor a redelivery applies it twice.
async fn apply<C, Q>(
    conn: &mut C,
    row: &StoredDelivery,
    statement: Option<Q>,
    log: Log,
) -> Result<(), Error>
where
    C: AsyncConnectionCore,
    Q: ExecuteDsl<C> + Send,
{
    if let Some(statement) = statement {
        statement.execute(conn).await?;
    }
    (log.applied)(row);
    Ok(())
}

/// Runs the receiver, the worker or both on `store` until Ctrl-C.
async fn serve<S, P, H>(
    store: S,
    retention: RetentionPolicy,
    example: &Example<P>,
    mode: Option<Mode>,
    handler: H,
) -> Result<(), Error>
where
    S: Inbox + Clone + 'static,
    P: Provider + 'static,
    H: for<'c> Fn(
            &'c mut S::Conn,
            &'c StoredDelivery,
        ) -> hookbox_core::BoxFuture<'c, Result<(), Error>>
        + Send
        + Sync
        + 'static,
{
    // the receiver first: a bad secret, cache or port stops the process before any work
    let receiver = if mode == Some(Mode::Worker) {
        None
    } else {
        let provider = (example.provider)(env_or("WEBHOOK_SECRET", example.demo_secret))?;
        let redis_url = env_or("HOOKBOX_REDIS_URL", "");
        let webhook = if redis_url.is_empty() {
            Webhook::inbox(provider, store.clone())
        } else {
            // duplicates answered from Redis; every decision is still the database's
            let redis = hookbox_redis_cache::connect(&redis_url)?;
            let cached = Cached::new(store.clone(), redis, CacheOptions::default(), &retention)?;
            Webhook::inbox(provider, cached)
        };
        let app = webhook.into_router(example.path);
        let port = env_or("PORT", "3000");
        let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
        println!("listening on http://{}", listener.local_addr()?);
        Some((listener, app))
    };

    // Ctrl-C stops both: the request and the row in progress finish first
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.ok();
        stop.send_replace(true);
    });
    let until_stop = |mut stopped: watch::Receiver<bool>| async move {
        stopped.wait_for(|&stop| stop).await.ok();
    };
    let worker = (mode != Some(Mode::Receiver)).then(|| {
        let stop = until_stop(stopped.clone());
        if mode.is_some() {
            (example.log.worker_started)();
        }
        tokio::spawn(
            async move { run_worker(&store, handler, Duration::from_millis(250), stop).await },
        )
    });
    if let Some((listener, app)) = receiver {
        axum::serve(listener, app)
            .with_graceful_shutdown(until_stop(stopped))
            .await?;
    }
    if let Some(worker) = worker {
        let report = worker.await??;
        (example.log.stopped)(&report);
    }
    Ok(())
}

/// Returns the environment variable `name`, or `default` when it is unset or empty.
fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| default.to_owned())
}
