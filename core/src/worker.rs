//! The worker loop that drains an [`Inbox`].

use std::future::Future;
use std::time::Duration;

use crate::handler::Handler;
use crate::inbox::{Inbox, Worked};
use crate::store::StoreError;

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
    tokio::pin!(shutdown);
    loop {
        // checked between rows only: a row in progress always finishes its transaction
        if futures_ready(&mut shutdown) {
            return Ok(report);
        }
        let wait = match inbox.work_one(&handler).await {
            Ok(Worked::Processed { .. }) => {
                report.processed += 1;
                continue;
            }
            Ok(Worked::Failed { dead, .. }) => {
                report.failed += 1;
                report.dead += u64::from(dead);
                continue;
            }
            Ok(Worked::Idle) => idle,
            Err(err) if err.is_transient() => {
                report.store_errors += 1;
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

/// Polls `future` once without waiting.
fn futures_ready<F: Future<Output = ()>>(future: &mut std::pin::Pin<&mut F>) -> bool {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    future.as_mut().poll(&mut cx).is_ready()
}
