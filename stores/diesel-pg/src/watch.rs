//! The watch every pooled connection carries: which transaction depth a failed
//! statement left aborted, and whether a transaction is open at all.

use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel_async::{AsyncConnection as _, AsyncPgConnection};

/// Watches a connection's statements for one that failed inside a transaction.
///
/// PostgreSQL aborts a transaction at its first failed statement and answers a later
/// `COMMIT` with a silent `ROLLBACK`. A side effect that swallows a statement's error
/// and returns `Ok` would therefore have the store report the delivery as applied
/// while nothing, not even the key, was committed: the sender gets its 2xx and never
/// retries. The store checks this watch before committing and rolls back instead.
pub(crate) struct FailureWatch {
    // the instrumentation the connection had (diesel's global default), still fed
    inner: Option<Box<dyn Instrumentation>>,
    depth: u32,
    // the outermost transaction depth at which a statement failed, until a rollback
    // to or above that depth undoes it
    failed_at: Option<u32>,
}

impl FailureWatch {
    pub(crate) fn new() -> Self {
        Self {
            inner: diesel::connection::get_default_instrumentation(),
            depth: 0,
            failed_at: None,
        }
    }
}

impl Instrumentation for FailureWatch {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        match &event {
            InstrumentationEvent::BeginTransaction { depth, .. } => {
                self.depth = depth.get();
                if self.depth == 1 {
                    self.failed_at = None;
                }
            }
            InstrumentationEvent::FinishQuery { error: Some(_), .. } if self.depth > 0 => {
                let depth = self.depth;
                self.failed_at = Some(self.failed_at.map_or(depth, |at| at.min(depth)));
            }
            InstrumentationEvent::RollbackTransaction { depth, .. } => {
                if self.failed_at.is_some_and(|at| at >= depth.get()) {
                    self.failed_at = None;
                }
                self.depth = depth.get() - 1;
            }
            InstrumentationEvent::CommitTransaction { depth, .. } => {
                self.depth = depth.get() - 1;
            }
            _ => {}
        }
        if let Some(inner) = &mut self.inner {
            inner.on_connection_event(event);
        }
    }
}

/// Returns `true` when a statement failed in the open transaction (or the savepoint
/// the caller is in) and was not rolled back: committing would silently roll back.
pub(crate) fn statement_failed(conn: &mut AsyncPgConnection) -> bool {
    // a connection whose instrumentation was replaced is not watched: no claim
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.failed_at.is_some())
}

/// Forgets a failed statement after the caller rolled back to a savepoint of its
/// own (one diesel's transaction manager does not know of, so the watch cannot see
/// the rollback): the transaction is usable again.
pub(crate) fn forget_failed_statement(conn: &mut AsyncPgConnection) {
    if let Some(watch) = conn.instrumentation().downcast_mut::<FailureWatch>() {
        watch.failed_at = None;
    }
}

/// Returns `true` while a transaction (begun through diesel's transaction manager) is
/// open on the connection.
pub(crate) fn in_transaction(conn: &mut AsyncPgConnection) -> bool {
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.depth > 0)
}
