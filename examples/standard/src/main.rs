//! A Standard Webhooks receiver: `POST /webhooks/standard` verifies each delivery and
//! stores it in the inbox; a worker writes every event to a ledger exactly once, in
//! the same transaction that marks the delivery processed.
//!
//! ```text
//! example-standard                     receiver and worker in one process (default)
//! example-standard serve --no-worker   the receiver only
//! example-standard worker              the worker only: drains the inbox, no HTTP
//! ```
//!
//! Start as many of each as you like on one database: the inbox never gives one row to
//! two workers.
//!
//! Configuration: `PORT` (3000), `WEBHOOK_SECRET` (the demo secret below),
//! `HOOKBOX_STORE` (the SQLite file; in a `--features postgres` build, the Postgres
//! URL; in a `--features mysql` build, the MySQL URL), `HOOKBOX_REDIS_URL` (optional:
//! answer duplicates from Redis first).
#![allow(clippy::print_stdout)] // the "listening on" and "worker started" lines are how users and tests know it is up

use std::time::Duration;

use diesel::ExpressionMethods as _;
use hookbox_axum::{EdgeLimits, Webhook, health_router};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Delivery, HandlerError, run_worker};
use hookbox_standard::Standard;
use store::Conn;
use store::diesel_async::RunQueryDsl as _;
use tokio::sync::watch;

/// The demo signing secret; set `WEBHOOK_SECRET` to your endpoint's `whsec_…` secret.
const DEMO_SECRET: &str = "whsec_aG9va2JveC1zdGFuZGFyZC1kZW1vLXNlY3JldCEh";
const USAGE: &str = "usage: example-standard [serve [--no-worker] | worker]";

/// Anything that stops the process, with its message.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// Writes one ledger line for a delivery, on the inbox row's connection: the line and
/// the row's `processed_at` commit together, so a crash or a redelivery never writes
/// it twice. An error (a body that is not JSON, no `type`) rolls back; the worker
/// retries the row with backoff, then dead-letters it.
async fn record_event(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    let event: serde_json::Value = delivery.parse()?;
    let event_type = event["type"].as_str().ok_or("no type")?;
    tracing::debug!(event_type, "recording event");
    // a query-builder insert, not `sql_query`: its prepared statement is cached on
    // the connection, where raw SQL is parsed again on every call (on Postgres that
    // halved the worker's rate: docs/performance.md)
    diesel::insert_into(event_ledger::table)
        .values((
            event_ledger::delivery_id.eq(delivery.delivery_id()),
            event_ledger::event_type.eq(event_type),
            event_ledger::applied_at.eq(OffsetDateTime::now_utc().unix_timestamp()),
        ))
        .execute(conn)
        .await?;
    tracing::info!(key = %delivery.dedupe_key(), "applied once");
    Ok(())
}

diesel::table! {
    /// The ledger: one line per event applied (created by `store::sql::CREATE`; the
    /// query builder writes each database's dialect).
    event_ledger (delivery_id) {
        /// The provider's delivery id.
        delivery_id -> Text,
        /// The event's `type`.
        event_type -> Text,
        /// When it was applied, in Unix seconds.
        applied_at -> BigInt,
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // logs on stderr, so stdout's first line is the address
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let (serve, work) = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => (true, true),
        [serve] if serve == "serve" => (true, true),
        [serve, flag] if serve == "serve" && flag == "--no-worker" => (true, false),
        [worker] if worker == "worker" => (false, true),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };

    // split across processes (`serve --no-worker` + `worker`), both must name the
    // store they share: with the default, each would open a file of its own in its
    // working directory and the worker would drain nothing, silently
    if serve != work && env_or("HOOKBOX_STORE", "").is_empty() {
        eprintln!(
            "example-standard: HOOKBOX_STORE is required with `serve --no-worker` and `worker`: \
             set it to the store both processes share (the SQLite file, or the postgres:// \
             or mysql:// URL of a `--features postgres` or `--features mysql` build)"
        );
        std::process::exit(1);
    }
    let store = store::open(&env_or("HOOKBOX_STORE", store::DEFAULT)).await?;
    diesel::sql_query(store::sql::CREATE)
        .execute(&mut *store.connection().await?)
        .await?;
    let stop = shutdown_signal()?;

    // the receiver first: a bad secret, Redis URL or port stops the process before
    // any work
    let receiver = if serve {
        let provider = Standard::new(env_or("WEBHOOK_SECRET", DEMO_SECRET))?;
        // duplicates answered from Redis when HOOKBOX_REDIS_URL is set
        let webhook = match cache::from_env(&store)? {
            None => Webhook::inbox(provider, store.clone()),
            Some(cached) => Webhook::inbox(provider, cached),
        };
        // `GET /livez`, and `GET /readyz`: 503 while the store is unreachable
        let app = webhook
            .into_router("/webhooks/standard")
            .merge(health_router(store.clone()));
        let port = env_or("PORT", "3000");
        let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
        println!("listening on http://{}", listener.local_addr()?);
        Some((listener, app))
    } else {
        None
    };

    let worker = work.then(|| {
        tracing::info!("worker started");
        // on stdout too, after any address line: a script or test knows it is up
        println!("worker started");
        let (store, stop) = (store.clone(), stopped(stop.clone()));
        tokio::spawn(async move {
            run_worker(&store, record_event, Duration::from_millis(250), stop).await
        })
    });
    if let Some((listener, app)) = receiver {
        // headers and body must each arrive within 10 s, and past 256 requests in
        // flight the answer is 503 with Retry-After; graceful: in-flight requests
        // finish before the server stops
        hookbox_axum::serve(listener, app, EdgeLimits::default(), stopped(stop)).await;
    }
    if let Some(worker) = worker {
        // the row in progress commits or rolls back before the worker returns
        let report = worker.await??;
        tracing::info!(processed = report.processed, dead = report.dead, "stopped");
    }
    Ok(())
}

/// The Redis front cache, when `HOOKBOX_REDIS_URL` is set: duplicates answered from
/// Redis; every decision is still the database's (feature `redis`, on by default).
#[cfg(feature = "redis")]
mod cache {
    /// The store behind the cache, or `None` when `HOOKBOX_REDIS_URL` is unset.
    pub(crate) fn from_env(
        store: &super::store::Store,
    ) -> Result<Option<hookbox_redis_cache::Cached<super::store::Store>>, super::Error> {
        Ok(hookbox_redis_cache::Cached::from_env(
            store,
            "HOOKBOX_REDIS_URL",
        )?)
    }
}

/// A build without the `redis` feature has no cache: `HOOKBOX_REDIS_URL` stops it at
/// start rather than being ignored.
#[cfg(not(feature = "redis"))]
mod cache {
    /// Always `None` (the type is the store's, for the caller's `match`); an error
    /// when `HOOKBOX_REDIS_URL` is set.
    pub(crate) fn from_env(
        _store: &super::store::Store,
    ) -> Result<Option<super::store::Store>, super::Error> {
        if super::env_or("HOOKBOX_REDIS_URL", "").is_empty() {
            Ok(None)
        } else {
            Err(
                "HOOKBOX_REDIS_URL is set, but this build has no Redis cache: \
                 build with `--features redis`"
                    .into(),
            )
        }
    }
}

// one backend per build: the store modules below are alternatives
#[cfg(all(feature = "postgres", feature = "mysql"))]
compile_error!(
    "choose one store: build with `--features postgres` or `--features mysql`, not both"
);

/// The store, chosen at compile time: SQLite by default, Postgres with
/// `--features postgres`, MySQL or MariaDB with `--features mysql`. Only this module
/// names the backend; its `sql` creates the ledger in that database's dialect.
#[cfg(not(any(feature = "postgres", feature = "mysql")))]
mod store {
    pub(crate) use hookbox_sqlite::{Conn, SqliteStore as Store, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "hookbox-standard.db";

    /// The ledger's table in SQLite.
    pub(crate) mod sql {
        // each event to one ledger line.
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
            (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
    }

    /// Opens the SQLite file and applies hookbox's migrations.
    pub(crate) async fn open(path: &str) -> Result<Store, super::Error> {
        let servers = ["postgres://", "postgresql://", "mysql://"];
        if servers.iter().any(|scheme| path.starts_with(scheme)) {
            let hint = "this build stores in SQLite: build with `--features postgres` to use \
                        a postgres:// URL in HOOKBOX_STORE, or `--features mysql` for a \
                        mysql:// URL";
            return Err(hint.into());
        }
        let store = Store::open(path, hookbox_sqlite::SqliteOptions::default()).await?;
        store.migrate().await?;
        Ok(store)
    }
}

/// The store, chosen at compile time: SQLite by default, Postgres with
/// `--features postgres`, MySQL or MariaDB with `--features mysql`. Only this module
/// names the backend; its `sql` creates the ledger in that database's dialect.
#[cfg(all(feature = "postgres", not(feature = "mysql")))]
mod store {
    pub(crate) use hookbox_diesel_pg::{Conn, PgStore as Store, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/postgres";

    /// The ledger's table in PostgreSQL.
    pub(crate) mod sql {
        // each event to one ledger line.
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
            (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
    }

    /// Connects to Postgres and applies hookbox's migrations.
    pub(crate) async fn open(url: &str) -> Result<Store, super::Error> {
        let store = Store::connect(url, hookbox_diesel_pg::PgOptions::new()).await?;
        store.migrate().await?;
        Ok(store)
    }
}

/// The store, chosen at compile time: SQLite by default, Postgres with
/// `--features postgres`, MySQL or MariaDB with `--features mysql`. Only this module
/// names the backend; its `sql` creates the ledger in that database's dialect.
#[cfg(feature = "mysql")]
mod store {
    pub(crate) use hookbox_diesel_mysql::{Conn, MysqlStore as Store, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";

    /// The ledger's table in MySQL and MariaDB.
    pub(crate) mod sql {
        // each event to one ledger line.
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
            (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
    }

    /// Connects to MySQL or MariaDB and applies hookbox's migrations.
    pub(crate) async fn open(url: &str) -> Result<Store, super::Error> {
        let store = Store::connect(url, hookbox_diesel_mysql::MysqlOptions::new()).await?;
        store.migrate().await?;
        Ok(store)
    }
}

/// Flips to `true` on SIGINT (Ctrl-C) or SIGTERM (what `kill` and orchestrators send).
/// The handlers are in place when it returns, so a signal sent once the process has
/// printed its address is never missed.
fn shutdown_signal() -> std::io::Result<watch::Receiver<bool>> {
    let (send, receive) = watch::channel(false);
    #[cfg(unix)]
    let (mut int, mut term) = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        )
    };
    tokio::spawn(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await.ok();
        send.send_replace(true);
    });
    Ok(receive)
}

/// Completes once `stop` flips to `true`.
async fn stopped(mut stop: watch::Receiver<bool>) {
    stop.wait_for(|&stop| stop).await.ok();
}

/// Returns the environment variable `name`, or `default` when it is unset or empty.
fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| default.to_owned())
}
