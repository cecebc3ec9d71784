//! The watch every pooled connection carries: which transaction depth a failed
//! statement was seen at, and whether a transaction is open at all.

use diesel::QueryResult;
use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection};

use crate::error::is_duplicate_key;

/// Watches a connection's statements for one that failed inside a transaction.
///
/// InnoDB rolls back only the failed statement for most errors, but a deadlock
/// (error 1213) rolls back the whole transaction, the claimed key with it, and the
/// statements after it then run, and commit, each on its own. A side effect that
/// swallows a statement's error and returns `Ok` could therefore have the store
/// report the delivery as applied while the key was not committed: the sender gets
/// its 2xx, and a retry applies it again. The store checks this watch before
/// committing and rolls back instead. The failures the store expects of its own
/// statements (a duplicate key) are taken off again ([`forgive_since`]).
pub(crate) struct FailureWatch {
    // the instrumentation the connection had (diesel's global default), still fed
    inner: Option<Box<dyn Instrumentation>>,
    depth: u32,
    // the outermost transaction depth at which a statement failed, until a rollback
    // to or above that depth undoes it
    failed_at: Option<u32>,
    // a statement failed with an error InnoDB answers by rolling back the whole
    // transaction (a deadlock): the savepoints are gone with it
    aborted: bool,
}

impl FailureWatch {
    pub(crate) fn new() -> Self {
        Self {
            inner: diesel::connection::get_default_instrumentation(),
            depth: 0,
            failed_at: None,
            aborted: false,
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
                    self.aborted = false;
                }
            }
            InstrumentationEvent::FinishQuery {
                error: Some(error), ..
            } if self.depth > 0 => {
                let depth = self.depth;
                self.failed_at = Some(self.failed_at.map_or(depth, |at| at.min(depth)));
                self.aborted |= rolls_back_the_transaction(error);
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

/// Returns `true` for the errors InnoDB answers by rolling back the whole
/// transaction rather than the failed statement: a deadlock (1213). (A lock wait
/// timeout, 1205, does so only under `innodb_rollback_on_timeout = ON`, off by
/// default; the store then sees the savepoint gone and fails the batch.)
fn rolls_back_the_transaction(error: &diesel::result::Error) -> bool {
    matches!(
        error,
        diesel::result::Error::DatabaseError(_, info)
            if info.message().contains("Deadlock found when trying to get lock")
    )
}

/// Returns `true` when a statement of the open transaction failed with a deadlock:
/// InnoDB rolled the whole transaction back, its savepoints with it, and what runs
/// next on the connection runs outside any transaction.
pub(crate) fn transaction_aborted(conn: &mut AsyncMysqlConnection) -> bool {
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.aborted)
}

/// What the watch held before a statement whose failure may be expected.
#[derive(Clone, Copy)]
pub(crate) struct Mark(Option<u32>);

/// Returns the watch's state, to [`forgive_since`] a failure the caller expects.
pub(crate) fn mark(conn: &mut AsyncMysqlConnection) -> Mark {
    Mark(
        conn.instrumentation()
            .downcast_ref::<FailureWatch>()
            .and_then(|watch| watch.failed_at),
    )
}

/// Takes back a failure the caller expected of the statement it ran since `mark`
/// (a duplicate key: InnoDB rolled back that statement alone and the transaction
/// goes on), leaving any earlier failure recorded.
pub(crate) fn forgive_since(conn: &mut AsyncMysqlConnection, mark: Mark) {
    if let Some(watch) = conn.instrumentation().downcast_mut::<FailureWatch>() {
        watch.failed_at = mark.0;
    }
}

/// Returns `true` when a statement failed in the open transaction (or the savepoint
/// the caller is in) and was not rolled back.
pub(crate) fn statement_failed(conn: &mut AsyncMysqlConnection) -> bool {
    // a connection whose instrumentation was replaced is not watched: no claim
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.failed_at.is_some())
}

/// Forgets a failed statement after the caller rolled back to a savepoint of its
/// own (one diesel's transaction manager does not know of, so the watch cannot see
/// the rollback).
pub(crate) fn forget_failed_statement(conn: &mut AsyncMysqlConnection) {
    if let Some(watch) = conn.instrumentation().downcast_mut::<FailureWatch>() {
        watch.failed_at = None;
    }
}

/// Returns `true` while a transaction (begun through diesel's transaction manager) is
/// open on the connection.
pub(crate) fn in_transaction(conn: &mut AsyncMysqlConnection) -> bool {
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.depth > 0)
}

/// Runs one `INSERT` whose duplicate-key error is an answer, not a failure: `true`
/// when the row was added, `false` on error 1062 (InnoDB rolled back that statement
/// alone; the failure watch forgets it). Any other error is returned.
pub(crate) async fn insert_new(
    conn: &mut AsyncMysqlConnection,
    insert: impl AsyncFnOnce(&mut AsyncMysqlConnection) -> QueryResult<usize>,
) -> QueryResult<bool> {
    let before = mark(conn);
    match insert(conn).await {
        Ok(_) => Ok(true),
        Err(err) if is_duplicate_key(&err) => {
            forgive_since(conn, before);
            Ok(false)
        }
        Err(err) => Err(err),
    }
}
