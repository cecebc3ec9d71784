//! The worker loop that drains an [`Inbox`], a batch per transaction.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::Notify;

use crate::batch::{BatchLimits, RowOutcome, RowResult};
use crate::handler::Handler;
use crate::inbox::{Inbox, InboxAdmin};
use crate::store::StoreError;

/// How often a worker reads the inbox's counts for the backlog and lag gauges
/// (feature `metrics`).
#[cfg(feature = "metrics")]
const GAUGES_EVERY: Duration = Duration::from_secs(10);

/// What a worker did before it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Rows whose handler succeeded.
    pub processed: u64,
    /// Handler failures (each rolled back and rescheduled).
    pub failed: u64,
    /// Rows that became dead letters.
    pub dead: u64,
    /// Transient store errors the worker waited out.
    pub store_errors: u64,
    /// Transactions that ran at least one row.
    pub batches: u64,
}

impl WorkerReport {
    fn add(&mut self, other: &WorkerReport) {
        self.processed += other.processed;
        self.failed += other.failed;
        self.dead += other.dead;
        self.store_errors += other.store_errors;
        self.batches += other.batches;
    }
}

/// How [`run_worker_with`] drains an inbox.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_core::{BatchLimits, WorkerOptions};
///
/// let options = WorkerOptions::default()
///     .idle(Duration::from_millis(100))
///     .batch(BatchLimits::default().max_rows(200))
///     .concurrency(4);
/// assert_eq!(options.batch_limits().rows(), 200);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerOptions {
    idle: Duration,
    batch: BatchLimits,
    concurrency: Option<u32>,
}

impl Default for WorkerOptions {
    /// 250 ms idle, [`BatchLimits::default`], the store's concurrency.
    fn default() -> Self {
        Self {
            idle: Duration::from_millis(250),
            batch: BatchLimits::default(),
            concurrency: None,
        }
    }
}

impl WorkerOptions {
    /// Sets how long the worker waits when no row is due, or after a transient
    /// store error, before it looks again.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// Sets the bounds of each batch ([`BatchLimits::per_row`] for one row per
    /// transaction).
    pub fn batch(mut self, limits: BatchLimits) -> Self {
        self.batch = limits;
        self
    }

    /// Sets how many batches run at once in this worker (at least 1). By default the
    /// store decides ([`Inbox::worker_concurrency`]): several on Postgres, whose
    /// `SKIP LOCKED` lets batches run side by side, one on SQLite, which has one
    /// write lock.
    pub fn concurrency(mut self, batches: u32) -> Self {
        self.concurrency = Some(batches.max(1));
        self
    }

    /// Returns the idle wait.
    pub fn idle_wait(&self) -> Duration {
        self.idle
    }

    /// Returns the bounds of each batch.
    pub fn batch_limits(&self) -> BatchLimits {
        self.batch
    }

    /// Returns the concurrency set with [`WorkerOptions::concurrency`], if any.
    pub fn concurrency_setting(&self) -> Option<u32> {
        self.concurrency
    }
}

/// Drains `inbox` with `handler` until `shutdown` completes, with the default
/// [`WorkerOptions`] and `idle` as the wait when no row is due.
///
/// `handler` is the same [`Handler`] an inline endpoint takes:
/// `async |conn, delivery| { …; Ok(()) }`. See [`run_worker_with`] (and there,
/// why the inbox is also an [`InboxAdmin`]).
///
/// # Errors
/// A store error that is not transient.
pub async fn run_worker<I, H>(
    inbox: &I,
    handler: H,
    idle: Duration,
    shutdown: impl Future<Output = ()>,
) -> Result<WorkerReport, I::Error>
where
    I: Inbox + InboxAdmin,
    H: Handler<I::Conn> + 'static,
{
    run_worker_with(
        inbox,
        handler,
        WorkerOptions::default().idle(idle),
        shutdown,
    )
    .await
}

/// Drains `inbox` with `handler` until `shutdown` completes.
///
/// Each loop takes a batch of due rows ([`Inbox::work_batch`]) and commits it once;
/// `options` set the batch bounds, the idle wait and how many batches run at once.
///
/// Every handler failure logs a `WARN` line (target `hookbox::worker`) naming the
/// delivery (`provider`, `key`, `delivery_id`, `event_type`, `row_id`), the attempt
/// (`attempt` of `max_attempts`), when it is due again (`next_attempt_at`) and the
/// error with its causes (`error`); a failure that makes the row a dead letter logs
/// at `ERROR` instead. Transient store errors log at `WARN` at most once every 10 s,
/// with how many occurred (`errors`); a store error that stops the worker logs at
/// `ERROR`.
///
/// With the `metrics` feature it counts rows (`hookbox_worker_rows_total{outcome}`:
/// `processed`, `failed`, `dead`), batches (`hookbox_worker_batch_rows`, a histogram
/// of rows per batch) and store errors, and every 10 s sets the inbox's gauges
/// (`hookbox_inbox_pending`, `hookbox_inbox_dead`,
/// `hookbox_inbox_oldest_pending_age_seconds`, the lag) from
/// [`InboxAdmin::stats`]: the one reason the inbox must also be an
/// [`InboxAdmin`] (every store is, and `Arc<S>` and `&S` of one), whatever the
/// features.
///
/// When no row is due a loop waits the idle time before looking again. A transient
/// store error (the database restarting) is waited out the same way; any other
/// store error stops the worker. Shutdown is graceful: each batch in progress
/// finishes (commits or rolls back) before the worker returns, so no row is left
/// half-applied.
///
/// # Errors
/// A store error that is not transient (the other loops finish their batch first).
pub async fn run_worker_with<I, H>(
    inbox: &I,
    handler: H,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<WorkerReport, I::Error>
where
    I: Inbox + InboxAdmin,
    H: Handler<I::Conn> + 'static,
{
    let concurrency = options
        .concurrency
        .unwrap_or_else(|| inbox.worker_concurrency())
        .max(1);
    let stop = Stop::default();
    tracing::info!(
        target: "hookbox::worker",
        concurrency,
        max_rows = options.batch.rows(),
        time_budget_ms = options.batch.budget().as_millis() as u64,
        "worker started"
    );
    // one future type for every loop: the set stays `Send` when the inbox is
    // the first loop alone sets the inbox's gauges: reading the counts is a scan of
    // the inbox on some stores, once per interval is enough
    let mut loops: Vec<_> = (0..concurrency)
        .map(|index| Box::pin(drain(inbox, &handler, options, &stop, index == 0)))
        .collect();
    let mut results: Vec<Option<Result<WorkerReport, I::Error>>> =
        (0..concurrency).map(|_| None).collect();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut shutting_down = false;
    std::future::poll_fn(|cx| {
        if !shutting_down && shutdown.as_mut().poll(cx).is_ready() {
            shutting_down = true;
            stop.request();
        }
        for (future, result) in loops.iter_mut().zip(results.iter_mut()) {
            if result.is_none()
                && let Poll::Ready(done) = future.as_mut().poll(cx)
            {
                if done.is_err() {
                    // one loop's fatal error stops the others after their batch
                    stop.request();
                }
                *result = Some(done);
            }
        }
        if results.iter().all(Option::is_some) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    let mut report = WorkerReport::default();
    let mut failure = None;
    for result in results.into_iter().flatten() {
        match result {
            Ok(part) => report.add(&part),
            Err(err) => failure = failure.or(Some(err)),
        }
    }
    if let Some(err) = failure {
        return Err(err);
    }
    tracing::info!(
        target: "hookbox::worker",
        processed = report.processed,
        failed = report.failed,
        dead = report.dead,
        store_errors = report.store_errors,
        batches = report.batches,
        "worker stopped"
    );
    Ok(report)
}

/// The stop request every loop of one worker shares.
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    notify: Notify,
}

impl Stop {
    fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Sleeps `wait`, or less when a stop is requested meanwhile.
    async fn sleep(&self, wait: Duration) {
        let notified = self.notify.notified();
        if self.is_requested() {
            return;
        }
        tokio::select! {
            () = notified => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// One loop of a worker: batches until a stop is requested; `sets_gauges` for the
/// one loop that refreshes the inbox's gauges (feature `metrics`).
async fn drain<I, H>(
    inbox: &I,
    handler: &H,
    options: WorkerOptions,
    stop: &Stop,
    sets_gauges: bool,
) -> Result<WorkerReport, I::Error>
where
    I: Inbox + InboxAdmin,
    H: Handler<I::Conn> + 'static,
{
    #[cfg(not(feature = "metrics"))]
    let _ = sets_gauges;
    let mut report = WorkerReport::default();
    let store_errors = crate::LogEvery::new(crate::LogEvery::STORE_ERRORS);
    #[cfg(feature = "metrics")]
    let mut gauges = Gauges::default();
    loop {
        // checked between batches only: a batch in progress always finishes
        if stop.is_requested() {
            return Ok(report);
        }
        #[cfg(feature = "metrics")]
        if sets_gauges {
            gauges.refresh(inbox).await;
        }
        match inbox.work_batch(handler, options.batch).await {
            Ok(outcomes) if outcomes.is_empty() => stop.sleep(options.idle).await,
            Ok(outcomes) => {
                report.batches += 1;
                #[cfg(feature = "metrics")]
                metrics::histogram!("hookbox_worker_batch_rows").record(outcomes.len() as f64);
                for outcome in &outcomes {
                    count(&mut report, outcome);
                    log_outcome(outcome);
                }
            }
            Err(err) if err.is_transient() => {
                report.store_errors += 1;
                #[cfg(feature = "metrics")]
                metrics::counter!("hookbox_worker_store_errors_total").increment(1);
                if let Some(held_back) = store_errors.due() {
                    tracing::warn!(
                        target: "hookbox::worker",
                        errors = held_back + 1,
                        error = %crate::error_chain(&err),
                        "the store is unavailable; the worker waits and tries again"
                    );
                }
                stop.sleep(options.idle).await;
            }
            Err(err) => {
                tracing::error!(
                    target: "hookbox::worker",
                    error = %crate::error_chain(&err),
                    "the worker stopped on a store error that is not transient"
                );
                return Err(err);
            }
        }
    }
}

/// Adds one row's outcome to the report (and the metrics).
fn count(report: &mut WorkerReport, outcome: &RowOutcome) {
    match &outcome.result {
        RowResult::Processed => {
            report.processed += 1;
            #[cfg(feature = "metrics")]
            metrics::counter!("hookbox_worker_rows_total", "outcome" => "processed").increment(1);
        }
        RowResult::Failed(failure) => {
            report.failed += 1;
            report.dead += u64::from(failure.dead);
            #[cfg(feature = "metrics")]
            {
                metrics::counter!("hookbox_worker_rows_total", "outcome" => "failed").increment(1);
                if failure.dead {
                    metrics::counter!("hookbox_worker_rows_total", "outcome" => "dead")
                        .increment(1);
                }
            }
        }
    }
}

/// Logs a handler failure (`WARN`) or a new dead letter (`ERROR`), naming the
/// delivery; a processed row logs nothing above `DEBUG`.
fn log_outcome(outcome: &RowOutcome) {
    let key = &outcome.key;
    let event_type = outcome.event_type.as_deref().unwrap_or("");
    match &outcome.result {
        RowResult::Processed => tracing::debug!(
            target: "hookbox::worker",
            provider = key.provider(),
            key = %key,
            delivery_id = key.delivery_id(),
            event_type,
            row_id = outcome.id,
            "delivery processed"
        ),
        RowResult::Failed(failure) if failure.dead => tracing::error!(
            target: "hookbox::worker",
            provider = key.provider(),
            key = %key,
            delivery_id = key.delivery_id(),
            event_type,
            row_id = outcome.id,
            attempt = failure.attempts,
            max_attempts = failure.max_attempts,
            error = %failure.error,
            "handler failed at the attempt limit: the delivery is now a dead letter \
             (list with `hookbox inbox dead`, replay after a fix)"
        ),
        RowResult::Failed(failure) => {
            let next = failure
                .next_attempt_at
                .and_then(|at| {
                    at.format(&time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .unwrap_or_default();
            tracing::warn!(
                target: "hookbox::worker",
                provider = key.provider(),
                key = %key,
                delivery_id = key.delivery_id(),
                event_type,
                row_id = outcome.id,
                attempt = failure.attempts,
                max_attempts = failure.max_attempts,
                next_attempt_at = %next,
                error = %failure.error,
                "handler failed; the delivery will be retried"
            );
        }
    }
}

/// When the worker last set the inbox's gauges.
#[cfg(feature = "metrics")]
#[derive(Default)]
struct Gauges {
    last: Option<std::time::Instant>,
}

#[cfg(feature = "metrics")]
impl Gauges {
    /// Reads the inbox's counts and sets the gauges, at most every [`GAUGES_EVERY`];
    /// a failed read leaves them as they were (the store error shows elsewhere).
    async fn refresh<I: InboxAdmin>(&mut self, inbox: &I) {
        if self.last.is_some_and(|last| last.elapsed() < GAUGES_EVERY) {
            return;
        }
        self.last = Some(std::time::Instant::now());
        if let Ok(stats) = inbox.stats().await {
            let lag = stats.oldest_pending.map_or(0.0, |at| {
                (time::OffsetDateTime::now_utc() - at)
                    .as_seconds_f64()
                    .max(0.0)
            });
            metrics::gauge!("hookbox_inbox_pending").set(stats.pending as f64);
            metrics::gauge!("hookbox_inbox_dead").set(stats.dead as f64);
            metrics::gauge!("hookbox_inbox_oldest_pending_age_seconds").set(lag);
        }
    }
}
