//! The axum edge for hookbox: a webhook endpoint in one line.
//!
//! [`Webhook`] turns a provider (`hookbox-github`, `hookbox-stripe`, …) and a store
//! (`hookbox-sqlite`, `hookbox-diesel-pg`, …) into an axum [`Router`](axum::Router)
//! that reads the raw body with a size limit, verifies the signature, and either
//!
//! - **stores** the delivery in the inbox and answers 200 at once, for a worker to
//!   apply later with retries and dead letters ([`Webhook::inbox`], recommended), or
//! - **applies** your side effect inside the request, in the same transaction as the
//!   dedupe key ([`Webhook::inline`]).
//!
//! For other frameworks, [`receive`] and [`process_inline`] do the same work on a
//! [`HeaderMap`](hookbox_core::http::HeaderMap) and the body's
//! [`Bytes`](hookbox_core::bytes::Bytes), and [`EdgeError::status`] and
//! [`EdgeError::to_json`] give the answer.
//!
//! # Examples
//! A complete receiver: GitHub deliveries go into a SQLite inbox, and a worker task
//! applies each one exactly once.
//! ```no_run
//! use std::time::Duration;
//!
//! use diesel::sql_types::Text;
//! use diesel_async::RunQueryDsl as _;
//! use hookbox_axum::{EdgeLimits, Webhook};
//! use hookbox_core::{Delivery, HandlerError, run_worker};
//! use hookbox_github::GitHub;
//! use hookbox_sqlite::{Conn, SqliteOptions, SqliteStore, diesel, diesel_async};
//!
//! /// Applies one delivery, on the inbox row's transaction: this write and the row's
//! /// `processed_at` commit together, so a crash never applies it twice. The same
//! /// function would serve `Webhook::inline`.
//! async fn apply(conn: &mut Conn, delivery: &Delivery) -> Result<(), HandlerError> {
//!     diesel::sql_query("INSERT INTO pushes (delivery_id, body) VALUES (?, ?)")
//!         .bind::<Text, _>(delivery.delivery_id())
//!         .bind::<Text, _>(String::from_utf8_lossy(delivery.body()).into_owned())
//!         .execute(conn)
//!         .await?;
//!     Ok(())
//! }
//!
//! #[tokio::main(flavor = "multi_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = SqliteStore::open("hookbox.db", SqliteOptions::default()).await?;
//!     store.migrate().await?;
//!
//!     // the worker: drains the inbox until the process stops
//!     let worker_store = store.clone();
//!     let worker = tokio::spawn(async move {
//!         run_worker(&worker_store, apply, Duration::from_millis(250), std::future::pending()).await
//!     });
//!
//!     // the endpoint: verify, store, answer 200
//!     let github = GitHub::new(std::env::var("GITHUB_WEBHOOK_SECRET")?)?;
//!     let app = Webhook::inbox(github, store).into_router("/webhooks/github");
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     // header and body timeouts and an in-flight cap (see "Serving under load")
//!     hookbox_axum::serve(listener, app, EdgeLimits::default(), std::future::pending()).await;
//!     worker.abort();
//!     Ok(())
//! }
//! ```
//!
//! [`Webhook`]'s own documentation has a runnable version that sends one signed
//! delivery through the router.
//!
//! # Status policy
//! Every answer has a JSON body; both shapes are stable.
//!
//! | what happened | status | body |
//! |---|---|---|
//! | stored now (inbox) | 200 | `{"ok":true,"outcome":"stored"}` |
//! | stored or applied before (a retry, a concurrent copy) | 200 | `{"ok":true,"outcome":"duplicate"}` |
//! | applied now (inline) | 200 | `{"ok":true,"outcome":"applied"}` |
//! | a handshake (Slack `url_verification`, Twitch `webhook_callback_verification`, Zoom `endpoint.url_validation`, Discord `PING`), verified; nothing stored, no handler run | what the provider expects (200 or 204) | the provider's expected reply (the challenge, Zoom's tokens, `{"type":1}`) |
//! | a required header is missing or malformed; the body is malformed or has no dedupe key; the body could not be read | 400 | `error`: `missing_header`, `malformed_header`, `malformed_body`, `missing_dedupe_key`, `unreadable_body` |
//! | the signature does not match; the timestamp is outside the window | 401 | `error`: `signature_mismatch`, `timestamp_too_old`, `timestamp_in_future` |
//! | the body did not arrive within `body_read_timeout` (`serve`) | 408 | `error`: `body_timeout` (the one 4xx a retry can pass) |
//! | the body is over the limit | 413 | `error`: `body_too_large` |
//! | the store could not store it, transiently (busy, connection lost, a full group-commit queue) | 503, `Retry-After: 1` | `error`: `store_unavailable` |
//! | more requests in flight than `max_in_flight` (`serve`) | 503, `Retry-After: 1` | `error`: `overloaded` |
//! | the store failed otherwise; the receiver's secret is unusable | 500 | `error`: `store_failed`, `invalid_secret` |
//! | the inline side effect failed (nothing committed) | 500 | `error`: `side_effect_failed` |
//!
//! A refusal reads, for example:
//! ```text
//! HTTP/1.1 400 Bad Request
//! content-type: application/json
//!
//! {"ok":false,"error":"missing_header","message":"missing header `X-Hub-Signature-256`: the provider always sends it; check that a proxy did not strip it"}
//! ```
//!
//! A 4xx means the sender got it wrong and nothing was stored: a retry of the same
//! bytes fails the same way, so it is never a 5xx (a provider retries a 5xx for
//! hours, and Shopify deletes a subscription after 8 consecutive failures). A 5xx
//! means the delivery was not stored and the sender's retry can succeed. The
//! `message` of a 4xx explains what to fix; the `message` of a 5xx only says to
//! retry, and the cause goes to the log.
//!
//! # Serving under load
//! Serve the router with [`serve`] rather than `axum::serve`. [`EdgeLimits`] bounds
//! three things, so slow or numerous clients cannot hold every file descriptor:
//! - the time to send the request headers (10 s): past it the connection closes.
//!   This also closes idle keep-alive connections, so behind a proxy that pools
//!   connections set it above the proxy's idle timeout;
//! - the time to send the body (10 s): past it 408, nothing stored;
//! - requests in flight (256): past the cap an immediate 503 with `Retry-After`,
//!   never a queue.
//!
//! Shutdown is graceful: the listener closes and the requests in flight finish.
//!
//! # Tracing
//! Each delivery runs in one `hookbox.delivery` span (level `INFO`) with these
//! fields, recorded as they become known:
//!
//! | field | value |
//! |---|---|
//! | `provider` | the provider's name (`github`, `stripe`, …) |
//! | `scope` | the dedupe key's scope: the source, and `/tenant` where there is one |
//! | `delivery_id` | the provider's delivery id |
//! | `event_type` | the provider's event type, where verification read one |
//! | `outcome` | `stored`, `duplicate`, `applied` or `handshake` (its name is the `event_type`) |
//! | `status` | the HTTP status answered |
//! | `error` | the error kind, for a refused delivery |
//!
//! It ends with one event: `INFO` "delivery acknowledged" for a 200, `WARN`
//! "delivery refused" with a `reason` for a 4xx, `ERROR` "delivery not stored" with
//! the `cause` chain for a 5xx. A transient store error (503 `store_unavailable`: the
//! database down, locked or out of connections) is a `WARN` "delivery not stored: the
//! store is unavailable" with `kind`, `cause` and `suppressed` (how many such lines
//! were held back), at most one per `interval_secs` (10 s) for the whole process, so
//! an outage does not flood the log. The body, the signature and the secret are never
//! logged (a side effect's own error text is, as the `cause`).
#![forbid(unsafe_code)]

mod error;
mod health;
#[cfg(feature = "metrics")]
mod meter;
mod receive;
mod response;
mod serve;
mod webhook;

pub use error::EdgeError;
pub use health::{READY_TIMEOUT, health_router, ready};
pub use receive::{process_inline, receive};
pub use response::Outcome;
pub use serve::{EdgeLimits, serve};
pub use webhook::Webhook;

// the framework, so users serve the router with the version this crate builds on
pub use axum;
