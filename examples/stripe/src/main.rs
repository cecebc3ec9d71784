//! A Stripe webhook receiver: `POST /webhooks/stripe` verifies each delivery and stores
//! it in the inbox; a worker credits the customer of every `payment_intent.succeeded`
//! event exactly once, in the same transaction that marks the delivery processed, and
//! stages a receipt email in the outbox in that same transaction; a relay sends the
//! receipt afterwards, with the message id as its `Idempotency-Key`.
//!
//! ```text
//! example-stripe                     receiver and worker in one process (default)
//! example-stripe serve --no-worker   the receiver only
//! example-stripe worker              the worker only: drains the inbox, no HTTP
//! ```
//!
//! Configuration: `PORT` (3000), `WEBHOOK_SECRET` (the demo secret below),
//! `HOOKBOX_STORE` (the SQLite file; in a `--features postgres` build, the Postgres
//! URL), `HOOKBOX_REDIS_URL` (optional: answer duplicates from Redis first),
//! `RECEIPT_SINK_URL` (optional: where the relay POSTs receipts; unset, it logs them).
#![allow(clippy::print_stdout)] // the "listening on" line is how users and tests find the port

use std::time::Duration;

use hookbox_axum::{EdgeLimits, Webhook, health_router};
use hookbox_core::{Delivery, HandlerError, Message, OutboxStore as _, run_worker};
use hookbox_outbox::{HttpSink, LogSink, RelayPolicy, Sinks, run_relay};
use hookbox_redis_cache::{CacheOptions, Cached};
use hookbox_stripe::Stripe;
use store::diesel::sql_types::{BigInt, Text};
use store::diesel_async::RunQueryDsl as _;
use store::{Conn, diesel};
use tokio::sync::watch;

/// The demo signing secret; set `WEBHOOK_SECRET` to your endpoint's `whsec_…`.
const DEMO_SECRET: &str = "whsec_hookbox_stripe_demo";
const USAGE: &str = "usage: example-stripe [serve [--no-worker] | worker]";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as numbered parameters.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS balances \
    (account TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
const CREDIT: &str = "INSERT INTO balances (account, balance) VALUES ($1, $2) \
    ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance";

/// The store, chosen at compile time: SQLite by default, Postgres with
/// `--features postgres`. Only this module names the backend.
#[cfg(not(feature = "postgres"))]
mod store {
    pub(crate) use hookbox_sqlite::{Conn, SqliteStore as Store, diesel, diesel_async};

    /// The database when `HOOKBOX_STORE` is unset.
    pub(crate) const DEFAULT: &str = "hookbox-stripe.db";

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

/// The outbox sink receipts are staged for.
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
        diesel::sql_query(CREDIT)
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
    diesel::sql_query(CREATE)
        .execute(&mut *store.connection().await?)
        .await?;
    let stop = shutdown_signal()?;

    // the receiver first: a bad secret, Redis URL or port stops the process before
    // any work
    let receiver = if serve {
        let provider = Stripe::new(env_or("WEBHOOK_SECRET", DEMO_SECRET))?;
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
            .into_router("/webhooks/stripe")
            .merge(health_router(store.clone()));
        let port = env_or("PORT", "3000");
        let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
        println!("listening on http://{}", listener.local_addr()?);
        Some((listener, app))
    } else {
        None
    };

    let sinks = if work { Some(receipt_sinks()?) } else { None };
    let worker = sinks.map(|sinks| {
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
            let inbox = run_worker(&store, handler, idle, stopped(stop.clone()));
            let relay = run_relay(&store, &sinks, RelayPolicy::default(), stopped(stop));
            let (inbox, relay) = tokio::join!(inbox, relay);
            Ok::<_, Error>((inbox?, relay?))
        })
    });
    if let Some((listener, app)) = receiver {
        // headers and body must each arrive within 10 s, and past 256 requests in
        // flight the answer is 503 with Retry-After; graceful: in-flight requests
        // finish before the server stops
        hookbox_axum::serve(listener, app, EdgeLimits::default(), stopped(stop)).await;
    }
    if let Some(worker) = worker {
        // the row in progress commits or rolls back, and the receipts in flight are
        // recorded, before the worker returns
        let (report, relayed) = worker.await??;
        tracing::info!(
            processed = report.processed,
            dead = report.dead,
            receipts_sent = relayed.sent,
            "stopped"
        );
    }
    Ok(())
}

/// Where receipts go: `RECEIPT_SINK_URL` by HTTP POST, or the log when it is unset.
fn receipt_sinks() -> Result<Sinks, Error> {
    let url = env_or("RECEIPT_SINK_URL", "");
    Ok(if url.is_empty() {
        Sinks::new().with(RECEIPTS, LogSink)
    } else {
        Sinks::new().with(RECEIPTS, HttpSink::new(&url)?)
    })
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
