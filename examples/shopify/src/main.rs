//! A Shopify webhook receiver: `POST /webhooks/shopify` verifies each delivery and
//! stores it in the inbox; a worker counts every `orders/create` per shop and applies
//! an `orders/updated` only when it is newer than the stored order (Shopify does not
//! deliver in order), exactly once, in the transaction that marks it processed. The
//! shop (`X-Shopify-Shop-Domain`) is the tenant: it scopes the dedupe key. Each
//! applied order event is staged in the outbox in that same transaction, and a relay
//! publishes it afterwards to NATS JetStream (`NATS_URL`) or RabbitMQ (`AMQP_URL`),
//! with the message id as the broker's dedupe id, or logs it when neither is set.
//!
//! ```text
//! example-shopify                     receiver, worker and relay in one process (default)
//! example-shopify serve --no-worker   the receiver only
//! example-shopify worker              the worker and the relay: no HTTP
//! example-shopify worker --no-relay   the worker only
//! example-shopify relay               the relay only
//! ```
//!
//! Configuration: `PORT` (3000), `WEBHOOK_SECRET` (the demo secret below),
//! `HOOKBOX_STORE` (the SQLite file; in a `--features postgres` build, the Postgres
//! URL; in a `--features mysql` build, the MySQL URL), `HOOKBOX_REDIS_URL` (optional:
//! answer duplicates from Redis first), `NATS_URL` and `ORDERS_SUBJECT`
//! (`shop.orders`), or `AMQP_URL` and `ORDERS_QUEUE` (`shop-orders`),
//! `RELAY_LEASE_SECS` (60), `RELAY_CONCURRENCY` (64).
#![allow(clippy::print_stdout)] // the first stdout line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{EdgeLimits, Webhook, health_router};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::time::format_description::well_known::Rfc3339;
use hookbox_core::{
    Delivery, HandlerError, Message, OutboxStore as _, TimestampAdvance, VersionGuard as _,
    run_worker,
};
use hookbox_outbox::{RelayPolicy, Sinks, connect_sink, run_relay};
use hookbox_shopify::Shopify;
use store::diesel::sql_types::{BigInt, Text};
use store::diesel_async::RunQueryDsl as _;
use store::{Conn, Store, diesel};
use tokio::sync::watch;

/// The demo signing secret; set `WEBHOOK_SECRET` to your app's client secret.
const DEMO_SECRET: &str = "hookbox-shopify-demo-secret";
const USAGE: &str = "usage: example-shopify [serve [--no-worker] | worker [--no-relay] | relay]";
/// The outbox sink order events are staged for.
const ORDERS: &str = "orders";

/// Applies one delivery on the inbox row's connection, so its writes commit with the
/// row's `processed_at` or not at all: an `orders/create` counts under its shop; an
/// `orders/updated` replaces the stored order only when its `updated_at` is newer
/// (the version guard, in the same transaction). Each applied order event is staged
/// for the `orders` sink in the same transaction, so it is published once the row
/// commits, and never for a row that rolled back. Other topics need nothing. An error
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
            diesel::sql_query(store::sql::COUNT)
                .bind::<Text, _>(shop)
                .execute(&mut *conn)
                .await?;
            publish(store, conn, delivery, shop, order_id, &order).await?;
        } else {
            let updated_at = order["updated_at"].as_str().ok_or("no updated_at")?;
            let at = OffsetDateTime::parse(updated_at, &Rfc3339)?;
            let object = format!("{shop}/orders/{order_id}");
            match store.advance_at(conn, &object, at).await? {
                TimestampAdvance::Applied => {
                    let total = order["total_price"].as_str().ok_or("no total_price")?;
                    tracing::info!(object, updated_at, "updating order");
                    diesel::sql_query(store::sql::UPDATE)
                        .bind::<Text, _>(shop)
                        .bind::<BigInt, _>(order_id)
                        .bind::<Text, _>(total)
                        .bind::<Text, _>(updated_at)
                        .execute(&mut *conn)
                        .await?;
                    publish(store, conn, delivery, shop, order_id, &order).await?;
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

/// Stages the order event for the `orders` sink on the row's connection: one message
/// per delivery, its id derived from the delivery, in order per order id.
async fn publish(
    store: &Store,
    conn: &mut Conn,
    delivery: &Delivery,
    shop: &str,
    order_id: i64,
    order: &serde_json::Value,
) -> Result<(), HandlerError> {
    let event = serde_json::json!({
        "shop": shop,
        "topic": delivery.event_type(),
        "order_id": order_id,
        "total_price": order["total_price"],
        "updated_at": order["updated_at"],
        "webhook_id": delivery.delivery_id(),
    });
    let message = Message::json(ORDERS, &event)?.with_ordering_key(format!("{shop}/{order_id}"));
    store
        .outbox(delivery.dedupe_key(), "orders")
        .stage(conn, message)
        .await?;
    Ok(())
}

/// Which parts this process runs.
struct Mode {
    serve: bool,
    work: bool,
    relay: bool,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // logs on stderr, so stdout's first line is the address (or the ready line)
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mode = match args.as_slice() {
        [] | ["serve"] => Mode {
            serve: true,
            work: true,
            relay: true,
        },
        ["serve", "--no-worker"] => Mode {
            serve: true,
            work: false,
            relay: false,
        },
        ["worker"] => Mode {
            serve: false,
            work: true,
            relay: true,
        },
        ["worker", "--no-relay"] => Mode {
            serve: false,
            work: true,
            relay: false,
        },
        ["relay"] => Mode {
            serve: false,
            work: false,
            relay: true,
        },
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    // the sink first: a broker that cannot be reached, or a stream or queue that does
    // not exist, stops the process before it takes any work
    let policy = relay_policy()?;
    let sinks = if mode.relay {
        Some(Sinks::new().with(ORDERS, connect_sink(&orders_sink_url()?, &policy).await?))
    } else {
        None
    };

    let store = store::open(&env_or("HOOKBOX_STORE", store::DEFAULT)).await?;
    let mut conn = store.connection().await?;
    for create in [store::sql::CREATE_COUNTS, store::sql::CREATE_ORDERS] {
        diesel::sql_query(create).execute(&mut *conn).await?;
    }
    drop(conn);
    let stop = shutdown_signal()?;

    // the receiver first: a bad secret, Redis URL or port stops the process before
    // any work
    let receiver = if mode.serve {
        let provider = Shopify::new(env_or("WEBHOOK_SECRET", DEMO_SECRET))?;
        // duplicates answered from Redis when HOOKBOX_REDIS_URL is set
        let webhook = match cache::from_env(&store)? {
            None => Webhook::inbox(provider, store.clone()),
            Some(cached) => Webhook::inbox(provider, cached),
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

    let worker = mode.work.then(|| {
        tracing::info!("worker started");
        let (store, stop) = (store.clone(), stopped(stop.clone()));
        // the handler owns a handle on the store for the version guard and the outbox
        let guard = store.clone();
        let handler =
            async move |conn: &mut Conn, delivery: &Delivery| apply(&guard, conn, delivery).await;
        tokio::spawn(
            async move { run_worker(&store, handler, Duration::from_millis(250), stop).await },
        )
    });
    let relay = sinks.map(|sinks| {
        tracing::info!(
            lease_secs = policy.lease.as_secs(),
            concurrency = policy.concurrency,
            "relay started"
        );
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move { run_relay(&store, &sinks, policy, stopped(stop)).await })
    });
    if !mode.serve {
        // no address to print: the ready line says what runs
        let parts = [
            mode.work.then_some("worker"),
            relay.as_ref().map(|_| "relay"),
        ];
        let parts: Vec<&str> = parts.into_iter().flatten().collect();
        println!("{} ready", parts.join(" and "));
    }
    if let Some((listener, app)) = receiver {
        // headers and body must each arrive within 10 s, and past 256 requests in
        // flight the answer is 503 with Retry-After; graceful: in-flight requests
        // finish before the server stops
        hookbox_axum::serve(listener, app, EdgeLimits::default(), stopped(stop.clone())).await;
    }
    // the row in progress commits or rolls back, and the publishes in flight are
    // recorded, before each part returns
    if let Some(worker) = worker {
        let report = worker.await??;
        tracing::info!(processed = report.processed, dead = report.dead, "stopped");
    }
    if let Some(relay) = relay {
        let report = relay.await??;
        tracing::info!(
            published = report.sent,
            retried = report.retried,
            dead = report.dead,
            "relay stopped"
        );
    }
    Ok(())
}

/// Where order events go: `NATS_URL` + `ORDERS_SUBJECT` (JetStream; a stream must
/// cover the subject), `AMQP_URL` + `ORDERS_QUEUE` (RabbitMQ; the queue must exist),
/// or, with neither set, the log.
fn orders_sink_url() -> Result<String, Error> {
    let nats = env_or("NATS_URL", "");
    let amqp = env_or("AMQP_URL", "");
    Ok(match (nats.is_empty(), amqp.is_empty()) {
        (false, false) => return Err("set NATS_URL or AMQP_URL, not both".into()),
        (false, true) => format!(
            "{}/{}",
            nats.trim_end_matches('/'),
            env_or("ORDERS_SUBJECT", "shop.orders")
        ),
        (true, false) => format!("{amqp}?queue={}", env_or("ORDERS_QUEUE", "shop-orders")),
        (true, true) => {
            tracing::info!("NATS_URL and AMQP_URL are unset: order events are logged");
            "log".to_string()
        }
    })
}

/// The relay's lease (`RELAY_LEASE_SECS`, default 60) and publishes in flight
/// (`RELAY_CONCURRENCY`, default 64). JetStream drops a resent id only within its
/// stream's duplicate window, which must outlast the retry cap (1 h) plus the lease:
/// the relay warns at start when it does not.
fn relay_policy() -> Result<RelayPolicy, Error> {
    let number = |name: &str, default: u64| -> Result<u64, Error> {
        env_or(name, &default.to_string())
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name} must be a whole number above 0").into())
    };
    let lease = Duration::from_secs(number("RELAY_LEASE_SECS", 60)?);
    Ok(RelayPolicy {
        lease,
        send_timeout: Duration::from_secs(30).min(lease.mul_f64(0.8)),
        concurrency: u32::try_from(number("RELAY_CONCURRENCY", 64)?)?,
        ..RelayPolicy::default()
    })
}

/// Anything that stops the process, with its message.
type Error = Box<dyn std::error::Error + Send + Sync>;

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
    pub(crate) const DEFAULT: &str = "hookbox-shopify.db";

    /// The handler's SQL for SQLite (it reads `$1`, `$2` as numbered parameters).
    pub(crate) mod sql {
        pub(crate) const CREATE_COUNTS: &str = "CREATE TABLE IF NOT EXISTS shop_orders \
            (shop TEXT PRIMARY KEY, orders BIGINT NOT NULL)";
        pub(crate) const COUNT: &str = "INSERT INTO shop_orders (shop, orders) VALUES ($1, 1) \
            ON CONFLICT (shop) DO UPDATE SET orders = shop_orders.orders + 1";
        // what the latest `orders/updated` said; only the version guard decides "latest"
        pub(crate) const CREATE_ORDERS: &str = "CREATE TABLE IF NOT EXISTS orders (shop TEXT NOT NULL, \
            order_id BIGINT NOT NULL, total_price TEXT NOT NULL, updated_at TEXT NOT NULL, \
            PRIMARY KEY (shop, order_id))";
        pub(crate) const UPDATE: &str = "INSERT INTO orders (shop, order_id, total_price, updated_at) \
            VALUES ($1, $2, $3, $4) ON CONFLICT (shop, order_id) DO UPDATE \
            SET total_price = excluded.total_price, updated_at = excluded.updated_at";
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
        pub(crate) const CREATE_COUNTS: &str = "CREATE TABLE IF NOT EXISTS shop_orders \
            (shop TEXT PRIMARY KEY, orders BIGINT NOT NULL)";
        pub(crate) const COUNT: &str = "INSERT INTO shop_orders (shop, orders) VALUES ($1, 1) \
            ON CONFLICT (shop) DO UPDATE SET orders = shop_orders.orders + 1";
        // what the latest `orders/updated` said; only the version guard decides "latest"
        pub(crate) const CREATE_ORDERS: &str = "CREATE TABLE IF NOT EXISTS orders (shop TEXT NOT NULL, \
            order_id BIGINT NOT NULL, total_price TEXT NOT NULL, updated_at TEXT NOT NULL, \
            PRIMARY KEY (shop, order_id))";
        pub(crate) const UPDATE: &str = "INSERT INTO orders (shop, order_id, total_price, updated_at) \
            VALUES ($1, $2, $3, $4) ON CONFLICT (shop, order_id) DO UPDATE \
            SET total_price = excluded.total_price, updated_at = excluded.updated_at";
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
        // VARBINARY: shops compare byte for byte, as on the other databases
        pub(crate) const CREATE_COUNTS: &str = "CREATE TABLE IF NOT EXISTS shop_orders \
            (shop VARBINARY(255) PRIMARY KEY, orders BIGINT NOT NULL)";
        pub(crate) const COUNT: &str = "INSERT INTO shop_orders (shop, orders) VALUES (?, 1) \
            ON DUPLICATE KEY UPDATE orders = orders + 1";
        // what the latest `orders/updated` said; only the version guard decides "latest"
        pub(crate) const CREATE_ORDERS: &str = "CREATE TABLE IF NOT EXISTS orders \
            (shop VARBINARY(255) NOT NULL, order_id BIGINT NOT NULL, total_price TEXT NOT NULL, \
            updated_at TEXT NOT NULL, PRIMARY KEY (shop, order_id))";
        pub(crate) const UPDATE: &str = "INSERT INTO orders (shop, order_id, total_price, updated_at) \
            VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
            total_price = VALUES(total_price), updated_at = VALUES(updated_at)";
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
