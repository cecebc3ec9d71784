//! The relay: lease due messages, send them outside any transaction, record the
//! outcome.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Leased, OutboxStore, RetryPolicy, Settlement, StoreError};

use crate::{SinkError, Sinks};

/// How a relay leases, sends and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayPolicy {
    /// Backoff between failed sends and the attempt limit after which a message
    /// becomes a dead letter (default: 5 attempts, 1 s doubling to 1 h, full jitter).
    pub retry: RetryPolicy,
    /// How long a leased message stays with this relay (default 60 s). A relay that
    /// dies holding it loses it to another relay when the lease expires.
    pub lease: Duration,
    /// The longest one send may take (default 30 s); a send that runs over is
    /// dropped and retried. Kept under the lease (at most four fifths of it), so a
    /// message's lease never expires while this relay is still sending it: two
    /// relays never send one message at once.
    pub send_timeout: Duration,
    /// Messages leased per round (default 16), sent concurrently: one round holds at
    /// most one message per ordering key, so this never reorders a key.
    pub batch: u32,
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
    /// Outcomes not recorded because the lease was gone (it expired and another
    /// relay took the message, or an operator reset it).
    pub lost_leases: u64,
}

/// What a relay did before it stopped: the sum of its rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Messages the sink accepted.
    pub sent: u64,
    /// Failed sends scheduled for another attempt.
    pub retried: u64,
    /// Messages that became dead letters.
    pub dead: u64,
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
        self.lost_leases += round.lost_leases;
    }
}

/// Sends messages from `store` to `sinks` until `shutdown` completes.
///
/// With the `metrics` feature it counts sends by outcome
/// (`hookbox_outbox_sends_total{sink,outcome}`: `sent`, `retry`, `dead`,
/// `lease_lost`), times them (`hookbox_outbox_send_duration_seconds{sink}`), and every
/// 10 s sets `hookbox_outbox_pending`, `hookbox_outbox_dead` and
/// `hookbox_outbox_oldest_pending_age_seconds`.
///
/// Each round leases up to [`RelayPolicy::batch`] due messages, sends them
/// concurrently outside any transaction, and records each outcome (sent, retry at a
/// backoff, or dead). When nothing is due it waits [`RelayPolicy::idle`]. Run as many
/// relays as you like, in one process or many: a lease keeps each message with one
/// relay, and per ordering key only the earliest pending message is ever leased.
///
/// Shutdown is graceful: a round in progress finishes (its sends and their records)
/// before the loop exits. A relay killed mid-round leaves its leases to expire; the
/// messages are sent again, with the same id, by the next relay.
///
/// # Errors
/// A store error that is not transient.
pub async fn run_relay<S: OutboxStore>(
    store: &S,
    sinks: &Sinks,
    policy: RelayPolicy,
    shutdown: impl Future<Output = ()>,
) -> Result<RelayReport, S::Error> {
    let mut report = RelayReport::default();
    #[cfg(feature = "metrics")]
    let mut gauges = crate::metrics::Gauges::default();
    tokio::pin!(shutdown);
    loop {
        if is_ready(&mut shutdown) {
            return Ok(report);
        }
        #[cfg(feature = "metrics")]
        gauges.refresh(store).await;
        let wait = match relay_once(store, sinks, &policy).await {
            Ok(round) if round.leased > 0 => {
                report.add(round);
                continue;
            }
            Ok(_) => policy.idle,
            Err(err) if err.is_transient() => {
                report.store_errors += 1;
                tracing::warn!(error = %hookbox_core::error_chain(&err), "outbox relay: store unavailable, waiting");
                policy.idle
            }
            Err(err) => return Err(err),
        };
        tokio::select! {
            () = &mut shutdown => return Ok(report),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Runs one round: lease up to [`RelayPolicy::batch`] due messages, send them, and
/// record the outcomes. A round that leased nothing reports `leased: 0`.
///
/// # Errors
/// The store failed to lease (nothing was sent) or to record an outcome (that
/// message's lease expires and it is sent again).
pub async fn relay_once<S: OutboxStore>(
    store: &S,
    sinks: &Sinks,
    policy: &RelayPolicy,
) -> Result<RelayRound, S::Error> {
    let leased = store
        .lease(policy.batch, policy.lease, OffsetDateTime::now_utc())
        .await?;
    let mut round = RelayRound {
        leased: leased.len() as u64,
        ..RelayRound::default()
    };
    let sends = leased
        .iter()
        .map(|leased| Box::pin(send_one(store, sinks, policy, leased)))
        .collect();
    for outcome in join_all(sends).await {
        match outcome? {
            Outcome::Sent => round.sent += 1,
            Outcome::Retried => round.retried += 1,
            Outcome::Dead => round.dead += 1,
            Outcome::LostLease => round.lost_leases += 1,
        }
    }
    Ok(round)
}

enum Outcome {
    Sent,
    Retried,
    Dead,
    LostLease,
}

/// Sends one leased message and records the outcome.
async fn send_one<S: OutboxStore>(
    store: &S,
    sinks: &Sinks,
    policy: &RelayPolicy,
    leased: &Leased,
) -> Result<Outcome, S::Error> {
    let message = &leased.message;
    let attempt = message.attempts;
    let result = if attempt > policy.retry.max_attempts {
        // leased more often than the limit allows: earlier relays died sending it
        Err(SinkError::Permanent(format!(
            "{} sends were started and none was recorded: the relay stopped while sending",
            attempt - 1
        )))
    } else {
        match sinks.get(&message.sink) {
            None => Err(SinkError::UnknownSink(message.sink.clone())),
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
        }
    };
    let now = OffsetDateTime::now_utc();
    let error_text = result.as_ref().err().map(ToString::to_string);
    let (settlement, outcome) = match (&result, &error_text) {
        (Ok(()), _) => (Settlement::Sent, Outcome::Sent),
        (Err(err), Some(text)) if err.is_permanent() || policy.retry.is_dead(attempt) => {
            (Settlement::Dead { error: text }, Outcome::Dead)
        }
        (Err(_), text) => (
            Settlement::Retry {
                error: text.as_deref().unwrap_or_default(),
                at: now + policy.retry.next_delay(attempt),
            },
            Outcome::Retried,
        ),
    };
    let log = |outcome: &'static str| {
        #[cfg(feature = "metrics")]
        crate::metrics::send(&message.sink, outcome);
        tracing::info!(
            message_id = %message.id,
            sink = %message.sink,
            attempt,
            outcome,
            error = error_text.as_deref(),
            "outbox send"
        );
    };
    if !store.settle(leased.lease, settlement, now).await? {
        log("lease_lost");
        return Ok(Outcome::LostLease);
    }
    log(match outcome {
        Outcome::Sent => "sent",
        Outcome::Retried => "retry",
        Outcome::Dead => "dead",
        Outcome::LostLease => "lease_lost",
    });
    Ok(outcome)
}

/// Runs `futures` concurrently on this task and returns their outputs in order: the
/// sends of one round borrow the store and the sinks, so they are not spawned.
async fn join_all<F: Future>(mut futures: Vec<Pin<Box<F>>>) -> Vec<F::Output> {
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// Polls `future` once without waiting.
fn is_ready<F: Future<Output = ()>>(future: &mut Pin<&mut F>) -> bool {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    future.as_mut().poll(&mut cx).is_ready()
}
