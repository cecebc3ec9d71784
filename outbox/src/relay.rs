//! The relay: lease due messages, send them outside any transaction, record the
//! outcome.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use hookbox_core::spi::{Lease, Leased, Settlement};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{OutboxAdmin, OutboxStore, RetryPolicy, StoreError};
use tokio::time::Instant;

use crate::{SinkError, Sinks};

/// The longest a finished send waits for others to be recorded in the same
/// transaction (a batch's worth, or no send left in flight, records at once).
const SETTLE_WITHIN: Duration = Duration::from_millis(5);

/// How long a message whose sink this relay lacks waits before a relay looks at it
/// again.
pub const UNKNOWN_SINK_RECHECK: Duration = Duration::from_secs(30);

/// How a relay leases, sends and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayPolicy {
    /// Backoff between failed sends and the attempt limit after which a message
    /// becomes a dead letter (default: 5 attempts, 1 s doubling to 1 h, full jitter).
    pub retry: RetryPolicy,
    /// How long a leased message stays with this relay (default 60 s). A relay that
    /// dies holding it loses it to another relay when the lease expires, so this is
    /// also how long a killed relay's messages (and the later messages of their
    /// ordering keys) wait. Shorter: faster recovery after a crash, but every send
    /// must finish within four fifths of it (see
    /// [`RelayPolicy::send_timeout`]), and a broker's dedupe window must cover it
    /// ([`RelayPolicy::longest_resend_gap`]).
    pub lease: Duration,
    /// The longest one send may take (default 30 s); a send that runs over is
    /// dropped and retried. Kept under the lease (at most four fifths of it), so a
    /// message's lease never expires while this relay is still sending it: two
    /// relays never send one message at once.
    pub send_timeout: Duration,
    /// Messages leased at a time (default 16): [`relay_once`] leases this many and
    /// sends them concurrently; [`run_relay`] leases this many whenever as many
    /// sends are free. One lease holds at most one message per ordering key, so
    /// this never reorders a key.
    pub batch: u32,
    /// Sends [`run_relay`] keeps in flight at once (default 64). A slow send holds
    /// one of them, never the others: the relay leases more as sends finish.
    pub concurrency: u32,
    /// How long to wait when nothing is due, or after a transient store error
    /// (default 250 ms).
    pub idle: Duration,
}

impl Default for RelayPolicy {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            lease: Duration::from_secs(60),
            send_timeout: Duration::from_secs(30),
            batch: 16,
            concurrency: 64,
            idle: Duration::from_millis(250),
        }
    }
}

impl RelayPolicy {
    /// Returns the send timeout the relay applies: [`RelayPolicy::send_timeout`],
    /// capped at four fifths of the lease.
    pub fn effective_send_timeout(&self) -> Duration {
        self.send_timeout.min(self.lease.mul_f64(0.8))
    }

    /// Returns the longest gap between two sends of one message: the retry cap (a
    /// send whose answer was lost is retried within it) plus the lease (a relay
    /// that died after sending leaves the message to the next relay when its lease
    /// ends). A broker that drops resent ids only within a window (NATS
    /// JetStream's `duplicate_window`) must keep them at least this long.
    pub fn longest_resend_gap(&self) -> Duration {
        self.retry.cap.saturating_add(self.lease)
    }
}

/// What one [`relay_once`] round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayRound {
    /// Messages leased this round (0: nothing was due).
    pub leased: u64,
    /// Messages the sink accepted.
    pub sent: u64,
    /// Failed sends scheduled for another attempt.
    pub retried: u64,
    /// Messages that became dead letters.
    pub dead: u64,
    /// Messages left pending, their attempt given back, because this relay has no
    /// sink of their name.
    pub unsent: u64,
    /// Outcomes not recorded because the lease was gone (it expired and another
    /// relay took the message, or an operator reset it).
    pub lost_leases: u64,
}

/// What a relay did before it stopped: the sum of its sends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Messages the sink accepted.
    pub sent: u64,
    /// Failed sends scheduled for another attempt.
    pub retried: u64,
    /// Messages that became dead letters.
    pub dead: u64,
    /// Messages left pending because this relay has no sink of their name.
    pub unsent: u64,
    /// Outcomes not recorded because the lease was gone.
    pub lost_leases: u64,
    /// Transient store errors the relay waited out.
    pub store_errors: u64,
}

impl RelayReport {
    fn add(&mut self, round: RelayRound) {
        self.sent += round.sent;
        self.retried += round.retried;
        self.dead += round.dead;
        self.unsent += round.unsent;
        self.lost_leases += round.lost_leases;
    }
}

/// Sends messages from `store` to `sinks` until `shutdown` completes.
///
/// Up to [`RelayPolicy::concurrency`] sends are in flight at once, outside any
/// transaction. Whenever [`RelayPolicy::batch`] of them are free (or none is in
/// flight) the relay leases more due messages, so a slow send holds up only
/// itself. Finished sends are recorded together, in one
/// [`OutboxStore::settle_many`] transaction per wake-up: sent, retried at a
/// backoff, dead, or, for a message whose sink this relay lacks, left pending with
/// its attempt given back. When nothing is due it waits [`RelayPolicy::idle`]. Run
/// as many relays as you like, in one process or many: a lease keeps each message
/// with one relay, and per ordering key only the earliest pending message is ever
/// leased.
///
/// Logs: a failed send at WARN (`message_id`, `sink`, `attempt`, `max_attempts`,
/// `next_attempt_at`, `error`), a dead letter at ERROR, a message without a sink
/// at WARN, a transient store error at WARN; a sent message at DEBUG.
///
/// With the `metrics` feature it counts sends by outcome
/// (`hookbox_outbox_sends_total{sink,outcome}`: `sent`, `retry`, `dead`,
/// `unsent`, `lease_lost`), times them
/// (`hookbox_outbox_send_duration_seconds{sink}`), and every 10 s sets
/// `hookbox_outbox_pending`, `hookbox_outbox_dead` and
/// `hookbox_outbox_oldest_pending_age_seconds` from [`OutboxAdmin::stats`]: the
/// one reason the store must also be an [`OutboxAdmin`] (every store is, and
/// `Arc<S>` and `&S` of one), whatever the features.
///
/// Shutdown is graceful: the relay stops leasing, lets the sends in flight finish
/// and records them, then returns. A relay killed mid-send leaves its leases to
/// expire; the messages are sent again, with the same id, by the next relay.
///
/// # Errors
/// A store error that is not transient.
pub async fn run_relay<S: OutboxStore + OutboxAdmin>(
    store: &S,
    sinks: &Sinks,
    policy: RelayPolicy,
    shutdown: impl Future<Output = ()>,
) -> Result<RelayReport, S::Error> {
    let mut report = RelayReport::default();
    // an outage logs a line per interval with the count, not a line per poll
    let store_errors = hookbox_core::LogEvery::new(hookbox_core::LogEvery::STORE_ERRORS);
    #[cfg(feature = "metrics")]
    let mut gauges = crate::metrics::Gauges::default();
    let concurrency = policy.concurrency.max(1) as usize;
    let batch = (policy.batch.max(1) as usize).min(concurrency);
    let mut in_flight = FuturesUnordered::new();
    let mut done: Vec<Sent> = Vec::new();
    let mut stopping = false;
    let mut idle_until: Option<Instant> = None;
    // finished sends wait at most this long for others to share their settle
    let mut settle_at: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let settle_now = done.len() >= batch
            || in_flight.is_empty()
            || stopping
            || settle_at.is_some_and(|at| Instant::now() >= at);
        if !done.is_empty() && settle_now {
            settle_at = None;
            match settle(store, &policy, &done).await {
                Ok(round) => report.add(round),
                Err(err) if err.is_transient() => {
                    // the leases expire and the messages go again, with their ids
                    report.store_errors += 1;
                    if let Some(held_back) = store_errors.due() {
                        tracing::warn!(
                            errors = held_back + 1,
                            error = %hookbox_core::error_chain(&err),
                            messages = done.len(),
                            "outbox relay: store unavailable, outcomes not recorded (sent again after the lease)"
                        );
                    }
                }
                Err(err) => return Err(err),
            }
            done.clear();
        }
        if stopping && in_flight.is_empty() {
            return Ok(report);
        }
        #[cfg(feature = "metrics")]
        gauges.refresh(store).await;
        let room = concurrency - in_flight.len();
        let rested = idle_until.is_none_or(|until| Instant::now() >= until);
        if !stopping && rested && (room >= batch || in_flight.is_empty()) {
            let asked = room.min(batch);
            match store
                .lease(asked as u32, policy.lease, OffsetDateTime::now_utc())
                .await
            {
                Ok(leased) => {
                    let got = leased.len();
                    for leased in leased {
                        in_flight.push(send(sinks, &policy, leased));
                    }
                    if got == asked {
                        idle_until = None;
                        continue;
                    }
                    idle_until = Some(Instant::now() + policy.idle);
                }
                Err(err) if err.is_transient() => {
                    report.store_errors += 1;
                    if let Some(held_back) = store_errors.due() {
                        tracing::warn!(errors = held_back + 1, error = %hookbox_core::error_chain(&err), "outbox relay: store unavailable, waiting");
                    }
                    idle_until = Some(Instant::now() + policy.idle);
                }
                Err(err) => return Err(err),
            }
        }
        let wake = idle_until.unwrap_or_else(|| Instant::now() + policy.idle);
        let settle_wake = settle_at.unwrap_or_else(|| Instant::now() + SETTLE_WITHIN);
        tokio::select! {
            biased;
            () = &mut shutdown, if !stopping => stopping = true,
            Some(sent) = in_flight.next(), if !in_flight.is_empty() => {
                done.push(sent);
                // everything else that finished meanwhile goes in the same settle
                while let Some(Some(sent)) = in_flight.next().now_or_never() {
                    done.push(sent);
                }
                settle_at.get_or_insert_with(|| Instant::now() + SETTLE_WITHIN);
            }
            () = tokio::time::sleep_until(settle_wake), if settle_at.is_some() => {}
            () = tokio::time::sleep_until(wake), if idle_until.is_some() && !stopping => {
                idle_until = None;
            }
        }
    }
}

/// Runs one round: lease up to [`RelayPolicy::batch`] due messages, send them
/// concurrently, and record the outcomes in one transaction. A round that leased
/// nothing reports `leased: 0`.
///
/// # Errors
/// The store failed to lease (nothing was sent) or to record the outcomes (their
/// leases expire and the messages are sent again).
pub async fn relay_once<S: OutboxStore>(
    store: &S,
    sinks: &Sinks,
    policy: &RelayPolicy,
) -> Result<RelayRound, S::Error> {
    let leased = store
        .lease(policy.batch, policy.lease, OffsetDateTime::now_utc())
        .await?;
    let count = leased.len() as u64;
    let sends: FuturesUnordered<_> = leased
        .into_iter()
        .map(|leased| send(sinks, policy, leased))
        .collect();
    let done: Vec<Sent> = sends.collect().await;
    let mut round = settle(store, policy, &done).await?;
    round.leased = count;
    Ok(round)
}

/// A finished send: the leased message and how the sink answered.
struct Sent {
    leased: Leased,
    /// [`Sink::kind`] of the sink that took the send (`None`: no sink of its name).
    kind: Option<&'static str>,
    result: Result<(), SinkError>,
}

/// Sends one leased message, within the send timeout.
fn send<'a>(
    sinks: &'a Sinks,
    policy: &'a RelayPolicy,
    leased: Leased,
) -> Pin<Box<dyn Future<Output = Sent> + Send + 'a>> {
    Box::pin(async move {
        let message = &leased.message;
        let attempt = message.attempts;
        let sink = sinks.get(&message.sink);
        let kind = sink.map(|sink| sink.kind());
        let result = match sink {
            None => Err(SinkError::UnknownSink(message.sink.clone())),
            Some(_) if attempt > policy.retry.max_attempts => {
                // leased more often than the limit allows: earlier relays died
                // sending it
                Err(SinkError::Permanent(format!(
                    "{} sends were started and none was recorded: the relay stopped while sending",
                    attempt - 1
                )))
            }
            Some(sink) => {
                let timeout = policy.effective_send_timeout();
                #[cfg(feature = "metrics")]
                let started = std::time::Instant::now();
                let sent = tokio::time::timeout(timeout, sink.send(message))
                    .await
                    .unwrap_or_else(|_| {
                        Err(SinkError::Temporary(format!(
                            "no answer within {} ms",
                            timeout.as_millis()
                        )))
                    });
                #[cfg(feature = "metrics")]
                crate::metrics::send_took(&message.sink, started.elapsed());
                sent
            }
        };
        Sent {
            leased,
            kind,
            result,
        }
    })
}

#[derive(Clone, Copy)]
enum Outcome {
    Sent,
    Retried(OffsetDateTime),
    Dead,
    Unsent(OffsetDateTime),
}

/// A failed send's error as the relay records it: `{kind} sink: {error}` when a sink
/// took the send, the error alone when the relay had no sink of the message's name.
fn recorded_error(kind: Option<&str>, err: &SinkError) -> String {
    match kind {
        Some(kind) => format!("{kind} sink: {err}"),
        None => err.to_string(),
    }
}

/// Splits a recorded error ([`OutboxMessage::last_error`](hookbox_core::OutboxMessage))
/// into the kind of sink that answered ([`Sink::kind`](crate::Sink::kind)) and its
/// answer; `None` for an error the relay recorded without a sink (no sink of the
/// message's name) or one recorded before sinks named their kind.
///
/// ```
/// assert_eq!(
///     hookbox_outbox::recorded_sink_answer("nats sink: permanent failure: too large"),
///     Some(("nats", "permanent failure: too large"))
/// );
/// assert_eq!(hookbox_outbox::recorded_sink_answer("no sink named `x` is configured"), None);
/// ```
pub fn recorded_sink_answer(last_error: &str) -> Option<(&str, &str)> {
    let (kind, answer) = last_error.split_once(" sink: ")?;
    let one_word = !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    one_word.then_some((kind, answer))
}

/// Records finished sends in one [`OutboxStore::settle_many`] and logs each.
async fn settle<S: OutboxStore>(
    store: &S,
    policy: &RelayPolicy,
    done: &[Sent],
) -> Result<RelayRound, S::Error> {
    let now = OffsetDateTime::now_utc();
    let decided: Vec<(Lease, Outcome, Option<String>)> = done
        .iter()
        .map(|sent| {
            let attempt = sent.leased.message.attempts;
            let outcome = match &sent.result {
                Ok(()) => Outcome::Sent,
                Err(SinkError::UnknownSink(_)) => Outcome::Unsent(now + UNKNOWN_SINK_RECHECK),
                Err(err) if err.is_permanent() || policy.retry.is_dead(attempt) => Outcome::Dead,
                Err(_) => Outcome::Retried(now + policy.retry.next_delay(attempt)),
            };
            let error = sent
                .result
                .as_ref()
                .err()
                .map(|err| recorded_error(sent.kind, err));
            (sent.leased.lease, outcome, error)
        })
        .collect();
    let settlements: Vec<(Lease, Settlement<'_>)> = decided
        .iter()
        .map(|(lease, outcome, error)| {
            let error = error.as_deref().unwrap_or_default();
            let settlement = match *outcome {
                Outcome::Sent => Settlement::Sent,
                Outcome::Retried(at) => Settlement::Retry { error, at },
                Outcome::Dead => Settlement::Dead { error },
                Outcome::Unsent(at) => Settlement::Release { error, at },
            };
            (*lease, settlement)
        })
        .collect();
    let held = store.settle_many(&settlements, now).await?;
    let mut round = RelayRound::default();
    for ((sent, (_, outcome, error)), held) in done.iter().zip(&decided).zip(held) {
        let message = &sent.leased.message;
        let attempt = message.attempts;
        let error = error.as_deref();
        let label = if !held {
            round.lost_leases += 1;
            tracing::info!(
                message_id = %message.id,
                sink = %message.sink,
                attempt,
                error,
                "outbox send not recorded: the lease was gone (another relay has the message)"
            );
            "lease_lost"
        } else {
            match outcome {
                Outcome::Sent => {
                    round.sent += 1;
                    tracing::debug!(message_id = %message.id, sink = %message.sink, attempt, "outbox message sent");
                    "sent"
                }
                Outcome::Retried(at) => {
                    round.retried += 1;
                    tracing::warn!(
                        message_id = %message.id,
                        sink = %message.sink,
                        attempt,
                        max_attempts = policy.retry.max_attempts,
                        next_attempt_at = %at,
                        error,
                        "outbox send failed; retrying"
                    );
                    "retry"
                }
                Outcome::Dead => {
                    round.dead += 1;
                    tracing::error!(
                        message_id = %message.id,
                        sink = %message.sink,
                        attempt,
                        max_attempts = policy.retry.max_attempts,
                        error,
                        "outbox message is dead; `hookbox outbox replay` sends it again"
                    );
                    "dead"
                }
                Outcome::Unsent(at) => {
                    round.unsent += 1;
                    tracing::warn!(
                        message_id = %message.id,
                        sink = %message.sink,
                        next_attempt_at = %at,
                        "outbox message left pending: this relay has no sink of its name (configure one)"
                    );
                    "unsent"
                }
            }
        };
        #[cfg(feature = "metrics")]
        crate::metrics::send(&message.sink, label);
        let _ = label;
    }
    Ok(round)
}
