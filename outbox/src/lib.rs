//! The hookbox outbox relay: send what a handler staged, after it committed.
//!
//! A handler that calls an email API or another company's HTTP API directly sends
//! twice when its transaction rolls back after the call, and never when the process
//! dies between the commit and the call. Instead, the handler stages a
//! [`Message`](hookbox_core::Message) with
//! [`Outbox::stage`](hookbox_core::Outbox::stage) on its own connection, so the
//! message commits with the claim and the handler's writes or not at all. This crate
//! sends committed messages: [`run_relay`] leases due messages, calls their
//! [`Sink`] outside any transaction, and records the outcome.
//!
//! # The guarantee
//! - **At least once to the sink.** A message is sent until a sink accepts it or it
//!   becomes a dead letter; a relay killed after the sink got the request and
//!   before the relay recorded it sends it again. Every send carries the same
//!   [`MessageId`](hookbox_core::MessageId), derived from the delivery, the handler
//!   and the message's position, so it is **exactly once wherever the downstream
//!   honours the id as an idempotency key** ([`HttpSink`] sends it as
//!   `Idempotency-Key`).
//! - **One relay at a time.** A lease keeps each message with one relay; a send
//!   that outlasts four fifths of the lease is dropped and retried, so a lease never
//!   expires under a live send.
//! - **Never counted sent without a sink.** A message whose sink name the relay has
//!   no sink for stays pending (its attempt given back) and the relay warns; only a
//!   sink's answer marks a message sent, and [`LogSink`] only when named.
//! - **No send waits for the slowest.** [`run_relay`] keeps up to
//!   [`RelayPolicy::concurrency`] sends in flight, leases more as they finish, and
//!   records finished sends together in one transaction.
//! - **In order per key.** Messages with one ordering key are sent in staging order:
//!   a later one waits while an earlier one is pending (a dead letter does not block
//!   the key).
//! - **Retries with backoff and full jitter, dead letters after the limit**
//!   ([`RelayPolicy::retry`]); `hookbox outbox dead` lists them and `hookbox outbox
//!   retry` sends them again.
//!
//! # Features
//! None is on by default: a crate that only stages messages pulls no HTTP or broker
//! client.
//! - `http`: [`HttpSink`], a POST per message with reqwest over rustls.
//! - `nats`: `NatsSink`, a JetStream publish per message with `Nats-Msg-Id`, on
//!   `async-nats`; it checks the stream's duplicate window against the relay's
//!   longest resend gap.
//! - `amqp`: `AmqpSink`, a persistent, mandatory, confirmed RabbitMQ publish per
//!   message with `message_id`, on `lapin`.
//! - `metrics`: sends by outcome, send durations and the backlog through the
//!   `metrics` facade (see [`run_relay`]).
//!
//! # Examples
//! Stage a receipt in the claim's transaction, then relay it:
//! ```
//! use hookbox_core::{DedupeKey, IdempotencyStore, Message, OutboxStore, Processed};
//! use hookbox_outbox::{LogSink, RelayPolicy, Sinks, relay_once};
//! use hookbox_sqlite::{SqliteOptions, SqliteStore};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = hookbox_sqlite::testing::TempDir::new();
//! let store = SqliteStore::open(&dir.db(), SqliteOptions::default()).await?;
//! store.migrate().await?;
//!
//! let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! let applied = store
//!     .process_once(&key, async |conn| {
//!         // your database writes here, then the effect that leaves the database:
//!         let receipt = Message::json("email", &serde_json::json!({"to": "ada@example.com"}))?;
//!         let id = store.outbox(&key, "receipts").stage(conn, receipt).await?;
//!         Ok(id)
//!     })
//!     .await?;
//! assert!(matches!(applied, Processed::Applied(_)));
//!
//! // a relay, usually `run_relay` in the worker process, sends it after the commit
//! let sinks = Sinks::new().with("email", LogSink);
//! let round = relay_once(&store, &sinks, &RelayPolicy::default()).await?;
//! assert_eq!(round.sent, 1);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

#[cfg(feature = "amqp")]
mod amqp;
mod connect;
mod error;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "nats")]
mod nats;
mod relay;
mod sink;

#[cfg(feature = "amqp")]
pub use amqp::{AmqpOptions, AmqpSink};
pub use connect::{connect_sink, sink_kind};
pub use error::SinkError;
#[cfg(feature = "http")]
pub use http::{ATTEMPT, HttpSink, IDEMPOTENCY_KEY};
#[cfg(feature = "nats")]
pub use nats::{NatsOptions, NatsSink};
pub use relay::{
    RelayPolicy, RelayReport, RelayRound, UNKNOWN_SINK_RECHECK, recorded_sink_answer, relay_once,
    run_relay,
};
pub use sink::{LogSink, Sink, Sinks};
