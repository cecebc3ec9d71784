//! A Shopify webhook receiver: `POST /webhooks/shopify` verifies each delivery and
//! stores it in the inbox; a worker counts every `orders/create` order under the shop
//! that sent it, exactly once, in the same transaction that marks the delivery
//! processed. The shop (`X-Shopify-Shop-Domain`) is the delivery's tenant: hookbox
//! scopes the dedupe key by it, so two shops' webhook ids never collide.
//!
//! Configuration (see README.md): `PORT`, `WEBHOOK_SECRET`, `HOOKBOX_STORE` (a SQLite
//! file, or a `postgres://` URL), `HOOKBOX_REDIS_URL` (optional front cache).
#![allow(clippy::print_stdout)] // the "listening on" line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{Webhook, axum};
use hookbox_core::{BoxFuture, Inbox, RetentionPolicy, StoredDelivery, run_worker};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_redis_cache::{CacheOptions, Cached};
use hookbox_shopify::Shopify;
use hookbox_sqlite::diesel::pg::Pg;
use hookbox_sqlite::diesel::query_builder::{QueryFragment, QueryId};
use hookbox_sqlite::diesel::sql_types::{BigInt, Text};
use hookbox_sqlite::diesel::sqlite::Sqlite;
use hookbox_sqlite::diesel_async::methods::ExecuteDsl;
use hookbox_sqlite::diesel_async::{AsyncConnectionCore, RunQueryDsl as _};
use hookbox_sqlite::{SqliteOptions, SqliteStore, diesel};
use tokio::sync::watch;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The demo signing secret; set `WEBHOOK_SECRET` to your app's client secret.
const DEMO_SECRET: &str = "hookbox-shopify-demo-secret";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as parameters numbered in the order they first appear.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS shop_orders \
    (shop TEXT PRIMARY KEY, orders BIGINT NOT NULL, last_order BIGINT NOT NULL)";
const RECORD: &str = "INSERT INTO shop_orders (shop, orders, last_order) VALUES ($1, 1, $2) \
    ON CONFLICT (shop) DO UPDATE \
    SET orders = shop_orders.orders + 1, last_order = excluded.last_order";

/// A statement either backend can run.
trait Statement: QueryFragment<Sqlite> + QueryFragment<Pg> + QueryId + Send {}
impl<T: QueryFragment<Sqlite> + QueryFragment<Pg> + QueryId + Send> Statement for T {}

/// Reads what a stored delivery asks for: count an `orders/create` order under its
/// shop. Other topics need nothing (`None`); the worker marks them processed all the
/// same. An error (no shop, no order id) rolls back, and the worker retries the row,
/// then dead-letters it.
fn record_order(row: &StoredDelivery) -> Result<Option<impl Statement>, Error> {
    if row.event_type.as_deref() != Some("orders/create") {
        return Ok(None);
    }
    // the tenant: every key, row and query of this delivery belongs to this shop
    let shop = row.key.tenant().ok_or("no X-Shopify-Shop-Domain")?;
    let order: serde_json::Value = row.parse()?;
    let order_id = order["id"].as_i64().ok_or("no order id")?;
    tracing::info!(shop, order_id, "recording order");
    Ok(Some(
        diesel::sql_query(RECORD)
            .bind::<Text, _>(shop.to_owned())
            .bind::<BigInt, _>(order_id),
    ))
}

/// Runs `statement` on the inbox row's transaction: it commits together with the row's
/// `processed_at`, so neither a crash nor a redelivery applies it twice.
async fn apply<C, Q>(conn: &mut C, row: &StoredDelivery, statement: Option<Q>) -> Result<(), Error>
where
    C: AsyncConnectionCore,
    Q: ExecuteDsl<C> + Send,
{
    if let Some(statement) = statement {
        statement.execute(conn).await?;
    }
    tracing::info!(
        key = %row.key,
        event = row.event_type,
        "applied once"
    );
    Ok(())
}

/// Serves the endpoint and runs the worker on `store` until Ctrl-C.
async fn run<S, H>(store: S, retention: RetentionPolicy, handler: H) -> Result<(), Error>
where
    S: Inbox + Clone + 'static,
    H: for<'c> Fn(&'c mut S::Conn, &'c StoredDelivery) -> BoxFuture<'c, Result<(), Error>>
        + Send
        + Sync
        + 'static,
{
    let provider = Shopify::new(env_or("WEBHOOK_SECRET", DEMO_SECRET))?;
    let redis_url = env_or("HOOKBOX_REDIS_URL", "");
    let webhook = if redis_url.is_empty() {
        Webhook::inbox(provider, store.clone())
    } else {
        // duplicates answered from Redis; every decision is still the database's
        let redis = hookbox_redis_cache::connect(&redis_url)?;
        let cached = Cached::new(store.clone(), redis, CacheOptions::default(), &retention)?;
        Webhook::inbox(provider, cached)
    };
    let app = webhook.into_router("/webhooks/shopify");
    let port = env_or("PORT", "3000");
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!("listening on http://{}", listener.local_addr()?);

    // Ctrl-C stops both: the request and the row in progress finish first
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        tokio::signal::ctrl_c().await.ok();
        stop.send_replace(true);
    });
    let until_stop = |mut stopped: watch::Receiver<bool>| async move {
        stopped.wait_for(|&stop| stop).await.ok();
    };
    let worker_stop = until_stop(stopped.clone());
    let worker = tokio::spawn(async move {
        run_worker(&store, handler, Duration::from_millis(250), worker_stop).await
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(until_stop(stopped))
        .await?;
    let report = worker.await??;
    tracing::info!(processed = report.processed, dead = report.dead, "stopped");
    Ok(())
}

/// Returns the environment variable `name`, or `default` when it is unset or empty.
fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // logs on stderr, so stdout's first line is the address
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let url = env_or("HOOKBOX_STORE", "hookbox-shopify.db");
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PgStore::connect(&url, PgOptions::new()).await?;
        store.migrate().await?;
        diesel::sql_query(CREATE)
            .execute(&mut *store.connection().await?)
            .await?;
        let retention = store.options().get_retention().clone();
        run(store, retention, |conn, row| {
            Box::pin(async move { apply(conn, row, record_order(row)?).await })
        })
        .await
    } else {
        let store = SqliteStore::open(&url, SqliteOptions::default()).await?;
        store.migrate().await?;
        diesel::sql_query(CREATE)
            .execute(&mut *store.connection().await?)
            .await?;
        let retention = store.options().retention_policy().clone();
        run(store, retention, |conn, row| {
            Box::pin(async move { apply(conn, row, record_order(row)?).await })
        })
        .await
    }
}
