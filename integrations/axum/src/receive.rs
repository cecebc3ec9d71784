//! The receive path without axum types, for any framework: verify, then store or
//! apply, with one tracing span per delivery.

use std::time::Instant;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::{
    Clock, Delivery, Handler, IdempotencyStore, Inbox, LogEvery, ProcessError, Processed, Provider,
    Received, Verified, VerifiedDelivery, error_chain,
};
use tracing::field::Empty;
use tracing::{Instrument as _, Span};

use crate::{EdgeError, Outcome};

/// Verifies a delivery and stores it in the inbox (inbox mode).
///
/// `body` must be the raw bytes exactly as received, read with the provider's limit
/// ([`VerifyOptions::body_limit`](hookbox_core::VerifyOptions::body_limit));
/// `clock` supplies `now` for the timestamp window. Both [`Outcome::Stored`] and
/// [`Outcome::Duplicate`] mean the delivery is durably stored: answer 200 and let a
/// worker ([`hookbox_core::run_worker`]) apply it. A handshake
/// ([`Provider::verify_request`]) is [`Outcome::Handshake`]: nothing is stored, and
/// the answer is the provider's expected reply ([`Outcome::status`],
/// [`Outcome::content_type`], [`Outcome::body`]).
///
/// The work runs in a `hookbox.delivery` span (see the [crate docs](crate#tracing)).
///
/// # Errors
/// [`EdgeError::Verify`] when verification fails (nothing is stored);
/// [`EdgeError::Store`] when the inbox could not store it. Answer
/// [`EdgeError::status`].
///
/// # Examples
/// ```no_run
/// # async fn example(
/// #     store: &hookbox_sqlite::SqliteStore,
/// #     headers: &hookbox_core::http::HeaderMap,
/// #     body: hookbox_core::bytes::Bytes,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// use hookbox_axum::receive;
/// use hookbox_core::SystemClock;
/// use hookbox_github::GitHub;
///
/// let github = GitHub::new("It's a Secret to Everybody")?;
/// let (status, json) = match receive(&github, store, &SystemClock, headers, body).await {
///     Ok(outcome) => (outcome.status(), outcome.body()),
///     Err(err) => (err.status(), err.to_json().into()),
/// };
/// # let _ = (status, json);
/// # Ok(())
/// # }
/// ```
pub async fn receive<S: Inbox>(
    provider: &dyn Provider,
    store: &S,
    clock: &dyn Clock,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Outcome, EdgeError> {
    let started = Instant::now();
    let span = delivery_span(provider.name());
    async {
        let result = async {
            let delivery = match verify(provider, clock, headers, body)? {
                Verified::Event(delivery) => delivery,
                Verified::Handshake(reply) => return Ok(Outcome::Handshake(reply)),
            };
            match store.receive(&delivery).await {
                Ok(Received::Stored) => Ok(Outcome::Stored),
                Ok(Received::Duplicate) => Ok(Outcome::Duplicate),
                Err(err) => Err(EdgeError::store(err)),
            }
        }
        .await;
        report(provider.name(), started, &result);
        result
    }
    .instrument(span)
    .await
}

/// Verifies a delivery and runs `handler` on it exactly once, inline (inline mode).
///
/// The handler is the same [`Handler`] the inbox worker takes (`async |conn,
/// delivery| { …; Ok(()) }`). It runs inside the store's claim transaction
/// ([`IdempotencyStore::process_once`]), on its connection, with the delivery's
/// [`Delivery`] view; its writes and the dedupe key commit together or not at all. A
/// copy whose key is already committed answers [`Outcome::Duplicate`] without running
/// it, and a handshake answers [`Outcome::Handshake`] without running it or touching
/// the store.
///
/// Prefer the inbox ([`receive`]) for anything slow: the sender waits for the whole
/// transaction (Shopify gives up after 5 s, GitHub after 10 s), a concurrent copy
/// waits for the key's lock, and the side effect must not await outside I/O while
/// the transaction is open.
///
/// # Errors
/// [`EdgeError::Verify`] when verification fails (nothing runs);
/// [`EdgeError::SideEffect`] when the handler fails and [`EdgeError::Store`] when
/// the store does; in both cases nothing was committed and the sender's retry runs
/// the handler again.
pub async fn process_inline<S, H>(
    provider: &dyn Provider,
    store: &S,
    clock: &dyn Clock,
    headers: &HeaderMap,
    body: Bytes,
    handler: &H,
) -> Result<Outcome, EdgeError>
where
    S: IdempotencyStore,
    H: Handler<S::Conn>,
{
    let started = Instant::now();
    let span = delivery_span(provider.name());
    async {
        let result = async {
            let now = clock.now();
            let delivery = match verify(provider, clock, headers, body)? {
                Verified::Event(delivery) => Delivery::received_now(delivery, now),
                Verified::Handshake(reply) => return Ok(Outcome::Handshake(reply)),
            };
            let delivery = &delivery;
            let processed = store
                .process_once(delivery.dedupe_key(), async |conn| {
                    handler.handle(conn, delivery).await
                })
                .await;
            match processed {
                Ok(Processed::Applied(())) => Ok(Outcome::Applied),
                Ok(Processed::Duplicate) => Ok(Outcome::Duplicate),
                Err(ProcessError::Store(err)) => Err(EdgeError::store(err)),
                Err(ProcessError::SideEffect(err)) => Err(EdgeError::SideEffect(err.into_inner())),
            }
        }
        .await;
        report(provider.name(), started, &result);
        result
    }
    .instrument(span)
    .await
}

/// Verifies at the clock's `now` and records the dedupe key (or the handshake's
/// name, as its event type) on the current span.
fn verify(
    provider: &dyn Provider,
    clock: &dyn Clock,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Verified, EdgeError> {
    let delivery = match provider.verify_request(headers, body, clock.now())? {
        Verified::Event(delivery) => delivery,
        handshake @ Verified::Handshake(_) => {
            if let Some(reply) = handshake.handshake() {
                Span::current().record("event_type", reply.kind());
            }
            return Ok(handshake);
        }
    };
    record(&delivery);
    Ok(Verified::Event(delivery))
}

/// Records the dedupe key and event type of a verified delivery on the current span.
fn record(delivery: &VerifiedDelivery) {
    let key = delivery.dedupe_key();
    let span = Span::current();
    span.record("scope", key.scope());
    span.record("delivery_id", key.delivery_id());
    if let Some(event_type) = delivery.event_type() {
        span.record("event_type", event_type);
    }
}

/// The span every delivery runs in. Its fields never hold the body, a header value
/// other than the delivery id, or a secret.
pub(crate) fn delivery_span(provider: &str) -> Span {
    tracing::info_span!(
        "hookbox.delivery",
        provider,
        scope = Empty,
        delivery_id = Empty,
        event_type = Empty,
        outcome = Empty,
        status = Empty,
        error = Empty,
    )
}

/// Records the outcome and status on the current span and emits one event: `info`
/// for a 2xx, `warn` for the sender's mistakes, `error` when the delivery was not
/// stored; with the `metrics` feature, counts it and its latency since `started`.
pub(crate) fn report(provider: &str, started: Instant, result: &Result<Outcome, EdgeError>) {
    #[cfg(feature = "metrics")]
    crate::meter::delivery(provider, started, result);
    #[cfg(not(feature = "metrics"))]
    let _ = (provider, started);
    let span = Span::current();
    match result {
        Ok(outcome) => {
            span.record("outcome", outcome.as_str());
            span.record("status", outcome.status().as_u16());
            tracing::info!("delivery acknowledged");
        }
        Err(err) => {
            let status = err.status();
            span.record("status", status.as_u16());
            span.record("error", err.kind());
            if err.kind() == "store_unavailable" {
                // an outage answers every delivery 503: one line per interval, with how
                // many were left out, instead of one per request
                if let Some(suppressed) = STORE_UNAVAILABLE_LOG.due() {
                    tracing::warn!(
                        kind = err.kind(),
                        cause = %error_chain(err),
                        suppressed,
                        interval_secs = STORE_UNAVAILABLE_LOG.interval().as_secs(),
                        "delivery not stored: the store is unavailable; the sender will retry"
                    );
                }
            } else if status.is_server_error() {
                tracing::error!(cause = %error_chain(err), "delivery not stored; the sender will retry");
            } else {
                // the sender-facing explanation: names a header or the likely
                // mistake, never the secret or the body
                tracing::warn!(reason = %err, "delivery refused");
            }
        }
    }
}

/// How often the edge logs a transient store error (`store_unavailable`): once per
/// interval at most, process-wide.
static STORE_UNAVAILABLE_LOG: LogEvery = LogEvery::new(LogEvery::STORE_ERRORS);
