//! A Shopify webhook receiver: `POST /webhooks/shopify` verifies each delivery and
//! stores it in the inbox; a worker counts every `orders/create` per shop and applies
//! an `orders/updated` only when it is newer than the stored order (Shopify does not
//! deliver in order), exactly once, in the transaction that marks it processed. The
//! shop (`X-Shopify-Shop-Domain`) is the tenant: it scopes the dedupe key.
//!
//! ```text
//! example-shopify                     receiver and worker in one process (default)
//! example-shopify serve --no-worker   the receiver only
//! example-shopify worker              the worker only: drains the inbox, no HTTP
//! ```
//!
//! Configuration: `PORT` (3000), `WEBHOOK_SECRET` (the demo secret below),
//! `HOOKBOX_STORE` (the SQLite file; in a `--features postgres` build, the Postgres
//! URL), `HOOKBOX_REDIS_URL` (optional: answer duplicates from Redis first).
#![allow(clippy::print_stdout)] // the "listening on" line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{EdgeLimits, Webhook, health_router};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::time::format_description::well_known::Rfc3339;
use hookbox_core::{Delivery, HandlerError, TimestampAdvance, VersionGuard as _, run_worker};
use hookbox_redis_cache::{CacheOptions, Cached};
use hookbox_shopify::Shopify;
use store::diesel::sql_types::{BigInt, Text};
use store::diesel_async::RunQueryDsl as _;
use store::{Conn, Store, diesel};
use tokio::sync::watch;

/// The demo signing secret; set `WEBHOOK_SECRET` to your app's client secret.
const DEMO_SECRET: &str = "hookbox-shopify-demo-secret";
const USAGE: &str = "usage: example-shopify [serve [--no-worker] | worker]";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as numbered parameters.
const CREATE_COUNTS: &str = "CREATE TABLE IF NOT EXISTS shop_orders \
    (shop TEXT PRIMARY KEY, orders BIGINT NOT NULL)";
const COUNT: &str = "INSERT INTO shop_orders (shop, orders) VALUES ($1, 1) \
    ON CONFLICT (shop) DO UPDATE SET orders = shop_orders.orders + 1";
// what the latest `orders/updated` said; only the version guard decides "latest"
const CREATE_ORDERS: &str = "CREATE TABLE IF NOT EXISTS orders (shop TEXT NOT NULL, \
    order_id BIGINT NOT NULL, total_price TEXT NOT NULL, updated_at TEXT NOT NULL, \
    PRIMARY KEY (shop, order_id))";
const UPDATE: &str = "INSERT INTO orders (shop, order_id, total_price, updated_at) \
    VALUES ($1, $2, $3, $4) ON CONFLICT (shop, order_id) DO UPDATE \
    SET total_price = excluded.total_price, updated_at = excluded.updated_at";

/// The store, chosen at compile time: SQLite by default, Postgres with
/// `--features postgres`. Only this module names the backend.
#[cfg(not(feature = "postgres"))]
mod store {
    pub(crate) use hookbox_sqlite::{Conn, SqliteStore as Store, diesel, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "hookbox-shopify.db";

    /// Opens the SQLite file and applies hookbox's migrations.
    pub(crate) async fn open(path: &str) -> Result<Store, super::Error> {
        if path.starts_with("postgres://") || path.starts_with("postgresql://") {
            let hint = "this build stores in SQLite: \
                        build with `--features postgres` to use a Postgres URL in HOOKBOX_STORE";
            return Err(hint.into());
        }
        let store = Store::open(path, hookbox_sqlite::SqliteOptions::default()).await?;
        store.migrate().await?;
        Ok(store)
    }
}

/// The store, chosen at compile time: SQLite by default, Postgres with
/// `--features postgres`. Only this module names the backend.
#[cfg(feature = "postgres")]
mod store {
    pub(crate) use hookbox_diesel_pg::{Conn, PgStore as Store, diesel, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/postgres";

    /// Connects to Postgres and applies hookbox's migrations.
    pub(crate) async fn open(url: &str) -> Result<Store, super::Error> {
        let store = Store::connect(url, hookbox_diesel_pg::PgOptions::new()).await?;
        store.migrate().await?;
        Ok(store)
    }
}

/// Anything that stops the process, with its message.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// Applies one delivery on the inbox row's connection, so its writes commit with the
/// row's `processed_at` or not at all: an `orders/create` counts under its shop; an
/// `orders/updated` replaces the stored order only when its `updated_at` is newer
/// (the version guard, in the same transaction). Other topics need nothing. An error
/// rolls back; the worker retries the row with backoff, then dead-letters it.
async fn apply(store: &Store, conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
    // the tenant: every key, row and query of this delivery belongs to this shop
    let shop = delivery.dedupe_key().tenant();
    let shop = shop.ok_or("no X-Shopify-Shop-Domain")?;
    let topic = delivery.event_type();
    if let Some("orders/create" | "orders/updated") = topic {
        let order: serde_json::Value = delivery.parse()?;
        let order_id = order["id"].as_i64().ok_or("no order id")?;
        if topic == Some("orders/create") {
            tracing::info!(shop, order_id, "recording order");
            diesel::sql_query(COUNT)
                .bind::<Text, _>(shop)
                .execute(&mut *conn)
                .await?;
        } else {
            let updated_at = order["updated_at"].as_str().ok_or("no updated_at")?;
            let at = OffsetDateTime::parse(updated_at, &Rfc3339)?;
            let object = format!("{shop}/orders/{order_id}");
            match store.advance_at(conn, &object, at).await? {
                TimestampAdvance::Applied => {
                    let total = order["total_price"].as_str().ok_or("no total_price")?;
                    tracing::info!(object, updated_at, "updating order");
                    diesel::sql_query(UPDATE)
                        .bind::<Text, _>(shop)
                        .bind::<BigInt, _>(order_id)
                        .bind::<Text, _>(total)
                        .bind::<Text, _>(updated_at)
                        .execute(conn)
                        .await?;
                }
                TimestampAdvance::Stale => tracing::info!(object, "stale update skipped"),
                // whole-second timestamps tie: neither copy is known to be the newer
                TimestampAdvance::Unknown => tracing::warn!(
                    object,
                    "same second as the stored order, kept: re-fetch it from the Admin API"
                ),
            }
        }
    }
    tracing::info!(key = %delivery.dedupe_key(), event = topic, "applied once");
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
    let mut conn = store.connection().await?;
    for create in [CREATE_COUNTS, CREATE_ORDERS] {
        diesel::sql_query(create).execute(&mut *conn).await?;
    }
    drop(conn);
    let stop = shutdown_signal()?;

    // the receiver first: a bad secret, Redis URL or port stops the process before
    // any work
    let receiver = if serve {
        let provider = Shopify::new(env_or("WEBHOOK_SECRET", DEMO_SECRET))?;
        let redis_url = env_or("HOOKBOX_REDIS_URL", "");
        let webhook = if redis_url.is_empty() {
            Webhook::inbox(provider, store.clone())
        } else {
            // duplicates answered from Redis; every decision is still the database's
            let redis = hookbox_redis_cache::connect(&redis_url)?;
            let cached = Cached::new(store.clone(), redis, CacheOptions::default())?;
            Webhook::inbox(provider, cached)
        };
        // `GET /livez`, and `GET /readyz`: 503 while the store is unreachable
        let app = webhook
            .into_router("/webhooks/shopify")
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
        let (store, stop) = (store.clone(), stopped(stop.clone()));
        // the handler owns a handle on the store for the version guard
        let guard = store.clone();
        let handler =
            async move |conn: &mut Conn, delivery: &Delivery| apply(&guard, conn, delivery).await;
        tokio::spawn(
            async move { run_worker(&store, handler, Duration::from_millis(250), stop).await },
        )
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
