//! The core of hookbox: receive webhooks exactly once.
//!
//! Every webhook sender delivers at least once: retries, lost acknowledgements, manual
//! resends and concurrent copies are normal operation. hookbox turns that into
//! exactly-once side effects in three steps:
//!
//! 1. a [`Provider`] verifies the signature over the raw bytes and yields a
//!    [`VerifiedDelivery`] with the provider's stable [`DedupeKey`];
//! 2. a store claims that key with a UNIQUE insert in the same transaction as your
//!    side effect (the store crates: `hookbox-sqlite`, `hookbox-diesel-pg`);
//! 3. keys are kept at least as long as the provider can resend ([`Retention`]).
//!
//! Your code reaches hookbox in one shape everywhere: an async closure that gets the
//! store's connection inside the claim's transaction ([`SideEffect`] for
//! `process_once`, [`Handler`] for an inline endpoint or the inbox worker, both
//! seeing the same [`Delivery`]). Effects that leave the database (an email, another
//! company's API) are staged as an [`Outbox`] message in the same transaction and
//! sent afterwards by a relay (`hookbox-outbox`).
//!
//! A store's traits split by who calls them:
//!
//! | caller | traits |
//! |---|---|
//! | the edge, your side effects and handlers, the worker, the relay | [`IdempotencyStore`], [`VersionGuard`], [`Inbox`], [`OutboxStore`] |
//! | a retention job | [`Purge`] |
//! | an operator (the `hookbox` command, an admin page) | [`InboxAdmin`], [`OutboxAdmin`], the same verbs on both: `stats`, `list`, `get`, `replay`, `replay_matching`, `purge`; object-safe, for `&dyn` use |
//!
//! This crate holds the shared types and builds without an async runtime; the
//! `worker` feature adds `run_worker` (on tokio), which the store crates enable.
//! Pick a provider crate (`hookbox-stripe`,
//! `hookbox-shopify`, `hookbox-github`, `hookbox-svix`, `hookbox-standard`) to verify.
//!
//! # Examples
//! A provider is used through this crate's trait, so code that routes several
//! endpoints can hold `&dyn Provider`:
//! ```
//! use bytes::Bytes;
//! use hookbox_core::{Provider, VerifiedDelivery, VerifyError};
//! use http::HeaderMap;
//! use time::OffsetDateTime;
//!
//! fn receive(
//!     provider: &dyn Provider,
//!     headers: &HeaderMap,
//!     body: Bytes,
//! ) -> Result<VerifiedDelivery, (http::StatusCode, String)> {
//!     provider
//!         .verify(headers, body, OffsetDateTime::now_utc())
//!         .map_err(|err: VerifyError| (err.http_status(), err.to_string()))
//! }
//! ```
#![forbid(unsafe_code)]

mod batch;
mod clock;
mod commit;
mod delivery;
mod error;
#[cfg(feature = "worker")]
mod guard;
mod handler;
mod handshake;
mod headers;
mod inbox;
mod log_every;
mod outbox;
mod provider;
mod purge;
mod retention;
mod retry;
mod secret;
mod signer;
pub mod spi;
mod store;
pub mod support;
#[cfg(feature = "testing")]
pub mod testing;
mod text;
#[cfg(feature = "worker")]
mod worker;

pub use batch::BatchLimits;
pub use clock::{Clock, FixedClock, SystemClock};
pub use commit::{CommitMode, GroupCommitStats};
pub use delivery::{DedupeKey, Delivery, DeliveryParts, VerifiedDelivery};
pub use error::VerifyError;
pub use handler::{
    Handler, HandlerError, HandlerFuture, SideEffect, SideEffectFuture, error_chain, write_chain,
};
pub use handshake::{HandshakeReply, Verified};
pub use headers::KeptHeaders;
pub use inbox::{
    BODY_SEARCH_WINDOW, DeliveryState, Inbox, InboxAdmin, InboxFilter, InboxOverview, InboxStats,
    MinuteCounts, ProviderCounts, Received, StoredDelivery, Worked,
};
pub use log_every::LogEvery;
pub use outbox::{
    Message, MessageId, MessageState, Outbox, OutboxAdmin, OutboxFilter, OutboxMessage,
    OutboxStats, OutboxStore, SinkCounts,
};
pub use provider::{DEFAULT_MAX_BODY_BYTES, DEFAULT_TOLERANCE, Provider, VerifyOptions};
pub use purge::{Purge, Purged};
pub use retention::{DEFAULT_KEEP, Retention, RetentionPolicy, RetentionTooShort};
pub use retry::RetryPolicy;
pub use secret::{Secret, Secrets};
pub use signer::{SignedHeaders, Signer};
pub use store::{
    Advance, AnyStoreError, BoxFuture, Claim, IdempotencyStore, ProcessError, ProcessResult,
    Processed, Store, StoreError, TimestampAdvance, VersionGuard,
};
pub use text::DeliveryText;
#[cfg(feature = "worker")]
pub use worker::{WorkerOptions, WorkerReport, run_worker, run_worker_with};

// re-exported so provider crates and users build headers and bodies with one version
pub use bytes;
pub use http;
pub use time;
