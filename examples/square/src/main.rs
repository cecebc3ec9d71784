//! A Square webhook receiver: `POST /webhooks/square` verifies each event notification
//! and stores it in the inbox; a worker writes every event to a ledger exactly once, in
//! the same transaction that marks the delivery processed.
//!
//! ```text
//! example-square                     receiver and worker in one process (default)
//! example-square serve --no-worker   the receiver only
//! example-square worker              the worker only: drains the inbox, no HTTP
//! ```
//!
//! Start as many of each as you like on one database: the inbox never gives one row to
//! two workers.
//!
//! Configuration: `PORT` (3000), `WEBHOOK_SECRET` (the subscription's signature key;
//! the demo key below), `PUBLIC_URL` (the subscription's notification URL, which Square
//! signs; by default `http://<the bound address>/webhooks/square`), `HOOKBOX_STORE`
//! (the SQLite file; in a `--features postgres` build, the Postgres URL; in a
//! `--features mysql` build, the MySQL URL), `HOOKBOX_REDIS_URL` (optional: answer
//! duplicates from Redis first).
#![allow(clippy::print_stdout)] // the "listening on" line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{EdgeLimits, Webhook, health_router};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Delivery, HandlerError, run_worker};
use hookbox_square::Square;
use store::diesel::sql_types::{BigInt, Text};
use store::diesel_async::RunQueryDsl as _;
use store::{Conn, diesel};
use tokio::sync::watch;

/// The demo signature key; set `WEBHOOK_SECRET` to the webhook subscription's signature key.
const DEMO_SECRET: &str = "hookbox_demo_signature_key";
/// The webhook route; Square signs the whole URL, `PUBLIC_URL`, which ends with it.
const ROUTE: &str = "/webhooks/square";
const USAGE: &str = "usage: example-square [serve [--no-worker] | worker]";

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
/// names the backend; its `sql` holds the handler's SQL in that database's dialect.
#[cfg(not(any(feature = "postgres", feature = "mysql")))]
mod store {
    pub(crate) use hookbox_sqlite::{Conn, SqliteStore as Store, diesel, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "hookbox-square.db";

    /// The handler's SQL for SQLite (it reads `$1`, `$2` as numbered parameters).
    pub(crate) mod sql {
        // each event to one ledger line.
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
            (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
        pub(crate) const RECORD: &str =
            "INSERT INTO event_ledger (delivery_id, event_type, applied_at) VALUES ($1, $2, $3)";
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
/// names the backend; its `sql` holds the handler's SQL in that database's dialect.
#[cfg(all(feature = "postgres", not(feature = "mysql")))]
mod store {
    pub(crate) use hookbox_diesel_pg::{Conn, PgStore as Store, diesel, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/postgres";

    /// The handler's SQL for PostgreSQL.
    pub(crate) mod sql {
        // each event to one ledger line.
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
            (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
        pub(crate) const RECORD: &str =
            "INSERT INTO event_ledger (delivery_id, event_type, applied_at) VALUES ($1, $2, $3)";
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
/// names the backend; its `sql` holds the handler's SQL in that database's dialect.
#[cfg(feature = "mysql")]
mod store {
    pub(crate) use hookbox_diesel_mysql::{Conn, MysqlStore as Store, diesel, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "mysql://root@127.0.0.1:3306/test";

    /// The handler's SQL for MySQL and MariaDB: `?` placeholders, and an upsert is
    /// `ON DUPLICATE KEY UPDATE` with `VALUES()` (MariaDB has no row alias).
    pub(crate) mod sql {
        // each event to one ledger line.
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
            (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
        pub(crate) const RECORD: &str =
            "INSERT INTO event_ledger (delivery_id, event_type, applied_at) VALUES (?, ?, ?)";
    }

    /// Connects to MySQL or MariaDB and applies hookbox's migrations.
    pub(crate) async fn open(url: &str) -> Result<Store, super::Error> {
        let store = Store::connect(url, hookbox_diesel_mysql::MysqlOptions::new()).await?;
        store.migrate().await?;
        Ok(store)
    }
}

/// Anything that stops the process, with its message.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// Writes one ledger line for a delivery, on the inbox row's connection: the line and
/// the row's `processed_at` commit together, so a crash or a redelivery never writes
/// it twice. An error (a body that is not JSON) rolls back; the worker retries the row
/// with backoff, then dead-letters it.
async fn record_event(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    // your code reads the payload here: `delivery.parse::<YourEvent>()?`
    let _event: serde_json::Value = delivery.parse()?;
    // the provider's event type, as verification read it
    let event_type = delivery.event_type().unwrap_or("unknown");
    tracing::info!(event_type, "recording event");
    diesel::sql_query(store::sql::RECORD)
        .bind::<Text, _>(delivery.delivery_id())
        .bind::<Text, _>(event_type)
        .bind::<BigInt, _>(OffsetDateTime::now_utc().unix_timestamp())
        .execute(conn)
        .await?;
    tracing::info!(key = %delivery.dedupe_key(), "applied once");
    Ok(())
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

    let store = store::open(&env_or("HOOKBOX_STORE", store::DEFAULT)).await?;
    diesel::sql_query(store::sql::CREATE)
        .execute(&mut *store.connection().await?)
        .await?;
    let stop = shutdown_signal()?;

    // the receiver first: a bad secret, notification URL, Redis URL or port stops the
    // process before any work
    let receiver = if serve {
        // bound first: without PUBLIC_URL, the notification URL is the bound address's
        let port = env_or("PORT", "3000");
        let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
        let address = listener.local_addr()?;
        let public_url = env_or("PUBLIC_URL", "");
        let notification_url = if public_url.is_empty() {
            let local = format!("http://{address}{ROUTE}");
            tracing::warn!(
                notification_url = %local,
                "PUBLIC_URL is unset: verifying against the bound address; behind a proxy, \
                 a load balancer or a tunnel, set PUBLIC_URL to the subscription's \
                 notification URL, which is the URL Square signs"
            );
            local
        } else {
            public_url
        };
        let provider = Square::new(env_or("WEBHOOK_SECRET", DEMO_SECRET), &notification_url)?;
        tracing::info!(notification_url = provider.notification_url(), "verifying");
        // duplicates answered from Redis when HOOKBOX_REDIS_URL is set
        let webhook = match cache::from_env(&store)? {
            None => Webhook::inbox(provider, store.clone()),
            Some(cached) => Webhook::inbox(provider, cached),
        };
        // `GET /livez`, and `GET /readyz`: 503 while the store is unreachable
        let app = webhook
            .into_router(ROUTE)
            .merge(health_router(store.clone()));
        println!("listening on http://{address}");
        Some((listener, app))
    } else {
        None
    };

    let worker = work.then(|| {
        tracing::info!("worker started");
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
