//! A Stripe webhook receiver: `POST /webhooks/stripe` verifies each delivery and stores
//! it in the inbox; a worker credits the customer of every `payment_intent.succeeded`
//! event exactly once, in the same transaction that marks the delivery processed, and
//! stages a receipt email in the outbox in that same transaction; a relay sends the
//! receipt afterwards, with the message id as its `Idempotency-Key`.
//!
//! ```text
//! example-stripe                     receiver, worker and relay in one process (default)
//! example-stripe serve --no-worker   the receiver only
//! example-stripe worker              the worker and the relay: no HTTP
//! example-stripe worker --no-relay   the worker only
//! example-stripe relay               the relay only: sends the staged receipts
//! ```
//!
//! Configuration: `PORT` (3000), `WEBHOOK_SECRET` (the demo secret below),
//! `HOOKBOX_STORE` (the SQLite file; in a `--features postgres` build, the Postgres
//! URL; in a `--features mysql` build, the MySQL URL), `HOOKBOX_REDIS_URL` (optional:
//! answer duplicates from Redis first), `RECEIPT_SINK_URL` (where the relay sends
//! receipts: an `http(s)://` URL, or `log`; a process that relays refuses to start
//! without it, and the default mode then runs no relay and leaves receipts pending),
//! `RELAY_LEASE_SECS` (60), `RELAY_CONCURRENCY` (64).
#![allow(clippy::print_stdout)] // the first stdout line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{EdgeLimits, Webhook, health_router};
use hookbox_core::{Delivery, HandlerError, Message, OutboxStore as _, RetryPolicy, run_worker};
use hookbox_outbox::{RelayPolicy, Sinks, connect_sink, run_relay};
use hookbox_stripe::Stripe;
use store::diesel::sql_types::{BigInt, Text};
use store::diesel_async::RunQueryDsl as _;
use store::{Conn, diesel};
use tokio::sync::watch;

/// The demo signing secret; set `WEBHOOK_SECRET` to your endpoint's `whsec_…`.
const DEMO_SECRET: &str = "whsec_hookbox_stripe_demo";
const USAGE: &str = "usage: example-stripe [serve [--no-worker] | worker [--no-relay] | relay]";

/// The outbox sink receipts are staged for (`RECEIPT_SINK_URL` says where it sends).
const RECEIPTS: &str = "receipts";

/// Credits the customer of a `payment_intent.succeeded` event, on the inbox row's
/// connection, and stages their receipt email in the outbox: the credit, the receipt
/// and the row's `processed_at` commit together, so neither a crash nor a resend
/// credits or emails twice. Other events need nothing; the worker marks them
/// processed all the same. An error (a body without the fields) rolls back; the
/// worker retries the row with backoff, then dead-letters it.
async fn credit(
    store: &store::Store,
    conn: &mut Conn,
    delivery: &Delivery,
) -> Result<(), HandlerError> {
    if delivery.event_type() == Some("payment_intent.succeeded") {
        let event: serde_json::Value = delivery.parse()?;
        let intent = &event["data"]["object"];
        let account = intent["customer"]
            .as_str()
            .ok_or("no data.object.customer")?;
        let amount = intent["amount"].as_i64().ok_or("no data.object.amount")?;
        tracing::info!(account, amount, "crediting");
        diesel::sql_query(store::sql::CREDIT)
            .bind::<Text, _>(account)
            .bind::<BigInt, _>(amount)
            .execute(conn)
            .await?;
        // the email leaves the database: staged here, sent by the relay after commit
        let receipt = serde_json::json!({ "customer": account, "amount": amount, "event": delivery.delivery_id() });
        store
            .outbox(delivery.dedupe_key(), "receipt")
            .stage(
                conn,
                Message::json(RECEIPTS, &receipt)?.with_ordering_key(account),
            )
            .await?;
    }
    tracing::info!(key = %delivery.dedupe_key(), event = delivery.event_type(), "applied once");
    Ok(())
}

/// Which parts this process runs.
struct Mode {
    serve: bool,
    work: bool,
    relay: Relay,
}

/// Whether this process relays receipts.
#[derive(PartialEq)]
enum Relay {
    /// It must: no `RECEIPT_SINK_URL` stops it at start.
    Required,
    /// When `RECEIPT_SINK_URL` is set (the all-in-one default mode).
    IfConfigured,
    /// Never.
    No,
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
            relay: Relay::IfConfigured,
        },
        ["serve", "--no-worker"] => Mode {
            serve: true,
            work: false,
            relay: Relay::No,
        },
        ["worker"] => Mode {
            serve: false,
            work: true,
            relay: Relay::Required,
        },
        ["worker", "--no-relay"] => Mode {
            serve: false,
            work: true,
            relay: Relay::No,
        },
        ["relay"] => Mode {
            serve: false,
            work: false,
            relay: Relay::Required,
        },
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    // the relay's configuration first: a process that must relay and has nowhere to
    // send stops here, before it marks anything
    let policy = relay_policy()?;
    let sinks = match (&mode.relay, receipt_sink_url()) {
        (Relay::No, _) => None,
        (_, Some(url)) => Some(
            Sinks::new().with(
                RECEIPTS,
                connect_sink(&url, &policy)
                    .await
                    .map_err(|err| format!("RECEIPT_SINK_URL: {err}"))?,
            ),
        ),
        (Relay::Required, None) => {
            eprintln!(
                "example-stripe: RECEIPT_SINK_URL is not set, and this process relays receipts. \
                 Set it to the receipt endpoint (http:// or https://), or to `log` to only log \
                 them; receipts stay pending until a relay sends them."
            );
            std::process::exit(2);
        }
        (Relay::IfConfigured, None) => {
            tracing::warn!(
                "RECEIPT_SINK_URL is not set: receipts are staged and stay pending; \
                 set it (or `log`), or run `example-stripe relay` with it"
            );
            None
        }
    };

    let store = store::open(&env_or("HOOKBOX_STORE", store::DEFAULT)).await?;
    diesel::sql_query(store::sql::CREATE)
        .execute(&mut *store.connection().await?)
        .await?;
    let stop = shutdown_signal()?;

    // the receiver first: a bad secret, Redis URL or port stops the process before
    // any work
    let receiver = if mode.serve {
        let provider = Stripe::new(env_or("WEBHOOK_SECRET", DEMO_SECRET))?;
        // duplicates answered from Redis when HOOKBOX_REDIS_URL is set
        let webhook = match cache::from_env(&store)? {
            None => Webhook::inbox(provider, store.clone()),
            Some(cached) => Webhook::inbox(provider, cached),
        };
        // `GET /livez`, and `GET /readyz`: 503 while the store is unreachable
        let app = webhook
            .into_router("/webhooks/stripe")
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
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let handler = {
                let store = store.clone();
                async move |conn: &mut Conn, delivery: &Delivery| {
                    credit(&store, conn, delivery).await
                }
            };
            let idle = Duration::from_millis(250);
            run_worker(&store, handler, idle, stopped(stop)).await
        })
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
    // the row in progress commits or rolls back, and the receipts in flight are
    // recorded, before each part returns
    if let Some(worker) = worker {
        let report = worker.await??;
        tracing::info!(processed = report.processed, dead = report.dead, "stopped");
    }
    if let Some(relay) = relay {
        let report = relay.await??;
        tracing::info!(
            receipts_sent = report.sent,
            retried = report.retried,
            dead = report.dead,
            "relay stopped"
        );
    }
    Ok(())
}

/// Where receipts go: `RECEIPT_SINK_URL` (`http(s)://…`, or `log` to log them and
/// count them sent), or `None` when it is unset.
fn receipt_sink_url() -> Option<String> {
    std::env::var("RECEIPT_SINK_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// The relay's lease (`RELAY_LEASE_SECS`, default 60) and sends in flight
/// (`RELAY_CONCURRENCY`, default 64). A relay killed mid-send leaves its receipts
/// (and the later receipts of the same customer) waiting for the lease: shorter
/// recovers sooner, but every send must finish within four fifths of it.
fn relay_policy() -> Result<RelayPolicy, Error> {
    let number = |name: &str, default: u64| -> Result<u64, Error> {
        env_or(name, &default.to_string())
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name} must be a whole number above 0").into())
    };
    let lease = Duration::from_secs(number("RELAY_LEASE_SECS", 60)?);
    let concurrency = u32::try_from(number("RELAY_CONCURRENCY", 64)?)?;
    Ok(RelayPolicy {
        retry: RetryPolicy::default(),
        lease,
        send_timeout: Duration::from_secs(30).min(lease.mul_f64(0.8)),
        concurrency,
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
    pub(crate) const DEFAULT: &str = "hookbox-stripe.db";

    /// The handler's SQL for SQLite (it reads `$1`, `$2` as numbered parameters).
    pub(crate) mod sql {
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS balances \
            (account TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        pub(crate) const CREDIT: &str = "INSERT INTO balances (account, balance) VALUES ($1, $2) \
            ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance";
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
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS balances \
            (account TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
        pub(crate) const CREDIT: &str = "INSERT INTO balances (account, balance) VALUES ($1, $2) \
            ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance";
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
        // VARBINARY: accounts compare byte for byte, as on the other databases
        pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS balances \
            (account VARBINARY(255) PRIMARY KEY, balance BIGINT NOT NULL)";
        pub(crate) const CREDIT: &str = "INSERT INTO balances (account, balance) VALUES (?, ?) \
            ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)";
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
