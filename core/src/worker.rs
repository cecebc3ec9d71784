//! The worker loop that drains an [`Inbox`].

use std::future::Future;
use std::time::Duration;

use crate::handler::Handler;
use crate::inbox::{Inbox, Worked};
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
}

/// Drains `inbox` with `handler` until `shutdown` completes.
///
/// `handler` is the same [`Handler`] an inline endpoint takes:
/// `async |conn, delivery| { …; Ok(()) }`.
///
/// With the `metrics` feature it counts rows (`hookbox_worker_rows_total{outcome}`:
/// `processed`, `failed`, `dead`) and store errors, and every 10 s sets the inbox's
/// gauges (`hookbox_inbox_pending`, `hookbox_inbox_dead`,
/// `hookbox_inbox_oldest_pending_age_seconds`, the lag).
///
/// When no row is due it waits `idle` before looking again. A transient store error
/// (the database restarting) is waited out the same way; any other store error stops
/// the worker. Shutdown is graceful: the row in progress finishes (commits or rolls
/// back) before the loop exits, so no row is left half-applied.
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
    I: Inbox,
    H: Handler<I::Conn> + 'static,
{
    let mut report = WorkerReport::default();
    #[cfg(feature = "metrics")]
    let mut gauges = Gauges::default();
    tokio::pin!(shutdown);
    loop {
        // checked between rows only: a row in progress always finishes its transaction
        if futures_ready(&mut shutdown) {
            return Ok(report);
        }
        #[cfg(feature = "metrics")]
        gauges.refresh(inbox).await;
        let wait = match inbox.work_one(&handler).await {
            Ok(Worked::Processed { .. }) => {
                report.processed += 1;
                #[cfg(feature = "metrics")]
                metrics::counter!("hookbox_worker_rows_total", "outcome" => "processed")
                    .increment(1);
                continue;
            }
            Ok(Worked::Failed { dead, .. }) => {
                report.failed += 1;
                report.dead += u64::from(dead);
                #[cfg(feature = "metrics")]
                {
                    metrics::counter!("hookbox_worker_rows_total", "outcome" => "failed")
                        .increment(1);
                    if dead {
                        metrics::counter!("hookbox_worker_rows_total", "outcome" => "dead")
                            .increment(1);
                    }
                }
                continue;
            }
            Ok(Worked::Idle) => idle,
            Err(err) if err.is_transient() => {
                report.store_errors += 1;
                #[cfg(feature = "metrics")]
                metrics::counter!("hookbox_worker_store_errors_total").increment(1);
                idle
            }
            Err(err) => return Err(err),
        };
        tokio::select! {
            () = &mut shutdown => return Ok(report),
            () = tokio::time::sleep(wait) => {}
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
    async fn refresh<I: Inbox>(&mut self, inbox: &I) {
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

/// Polls `future` once without waiting.
fn futures_ready<F: Future<Output = ()>>(future: &mut std::pin::Pin<&mut F>) -> bool {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    future.as_mut().poll(&mut cx).is_ready()
}
