//! The inbox's worker on MySQL and MariaDB, the batched path behind
//! [`Inbox::work_batch`](hookbox_core::Inbox::work_batch): `FOR UPDATE SKIP LOCKED`,
//! a batch per transaction, handlers without savepoints while they all succeed,
//! each in a savepoint once one fails, and the failures recorded.
//!
//! A batch locks up to N due rows with `FOR UPDATE SKIP LOCKED` (other workers skip
//! them, so batches run side by side), runs the handlers one after another, marks
//! the processed rows in one statement and commits once. No savepoint is opened on
//! that path: opening and releasing a savepoint costs a round trip per row. When a
//! handler fails, the whole transaction rolls back (nothing of it committed) and the
//! batch runs again with each handler inside its own savepoint, which records each
//! failure and keeps the neighbours' work.
//! A row runs in a batch on its first attempt only: a retry (a row whose handler
//! failed, panicked or timed out before) runs alone, so a poison row costs its
//! neighbours at most one redo.
//! A worker that dies mid-batch releases its rows with its connection: nothing of
//! the batch committed, and every row is due again at once. A handler that panics or
//! outruns its row timeout is abandoned: the batch rolls back (its connection is
//! closed, never reused), and a second transaction records the failure against that
//! row alone.
//!
//! The transaction runs at READ COMMITTED (the pool's setting): `FOR UPDATE SKIP
//! LOCKED` then locks the rows it returns and no gap between them, so new
//! deliveries are inserted while a batch runs. A deadlock inside a handler rolls
//! the whole batch back (InnoDB does so for error 1213, savepoints included): the
//! batch fails as a transient error, nothing of it is committed and every row is
//! due again, as after a failed commit.

use std::time::Instant;

use diesel::prelude::*;
use diesel_async::{
    AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection as _,
};
use hookbox_core::spi::{
    Abandoned, ErasedHandler, GuardedRun, RowFailure, RowOutcome, RowResult, run_guarded,
};
use hookbox_core::{BatchLimits, RetryPolicy, StoredDelivery, error_chain};
use time::OffsetDateTime;

use crate::claims::utc_now;
use crate::error::MysqlError;
use crate::rows::InboxRow;
use crate::schema::hookbox_inbox as inbox;
use crate::store::MysqlStore;
use crate::watch::{forget_failed_statement, statement_failed, transaction_aborted};

/// How a batch's transaction ended without committing.
enum BatchTxError {
    Db(diesel::result::Error),
    /// A row failed in a batch run without savepoints: everything is rolled back
    /// and the batch runs again, each row in a savepoint.
    Redo,
    /// A handler panicked or outran its timeout.
    Abandoned {
        row: Box<StoredDelivery>,
        reason: Abandoned,
    },
}

impl From<diesel::result::Error> for BatchTxError {
    fn from(err: diesel::result::Error) -> Self {
        Self::Db(err)
    }
}

/// How one row's savepoint ended, when its handler did not succeed.
enum RowTxError {
    Db(diesel::result::Error),
    /// The handler returned `Ok` after one of its statements failed: releasing the
    /// savepoint would fail and stop the worker, so the row fails instead, visibly.
    StatementFailed,
    Handler(GuardedRun),
}

impl From<diesel::result::Error> for RowTxError {
    fn from(err: diesel::result::Error) -> Self {
        Self::Db(err)
    }
}

/// What a batch's connection did.
enum Batch {
    Committed(Vec<RowOutcome>),
    Abandoned {
        row: Box<StoredDelivery>,
        reason: Abandoned,
    },
}

impl MysqlStore {
    /// `work_batch` (see the module docs): the batch transaction on a pooled
    /// connection, and an abandoned handler's failure recorded on a connection of
    /// its own.
    pub(crate) async fn run_work_batch(
        &self,
        handler: &ErasedHandler<'_, AsyncMysqlConnection>,
        limits: BatchLimits,
    ) -> Result<Vec<RowOutcome>, MysqlError> {
        let retry = self.inner.options.retry();
        let mut conn = self.connection().await?;
        let batch = conn
            .run(
                async |conn| match Self::run_without_savepoints(conn, handler, limits).await? {
                    Some(batch) => Ok(batch),
                    None => Self::run_batch(conn, handler, limits, &retry).await,
                },
            )
            .await?;
        match batch {
            Batch::Committed(outcomes) => Ok(outcomes),
            Batch::Abandoned { row, reason } => {
                // the batch rolled back before `run` returned; a connection the
                // abandoned handler left inside a transaction of its own is closed
                // as it drops (the server rolls back and releases the rows)
                drop(conn);
                Ok(vec![self.record_abandoned(&row, &reason, &retry).await?])
            }
        }
    }

    /// The batch transaction without savepoints, the common case: every handler
    /// succeeds, and a row costs only its handler's statements. At the first row
    /// that fails (or a statement its handler swallowed) the whole transaction rolls
    /// back and `None` asks for the batch with savepoints, which records that row's
    /// failure and keeps its neighbours' work: nothing of this run committed, so the
    /// rows that ran before it run again there, once. A batch of retries (rows that
    /// failed before) goes straight to the savepoint path.
    async fn run_without_savepoints(
        conn: &mut AsyncMysqlConnection,
        handler: &ErasedHandler<'_, AsyncMysqlConnection>,
        limits: BatchLimits,
    ) -> Result<Option<Batch>, MysqlError> {
        let batch = conn
            .transaction(async |conn| -> Result<Vec<RowOutcome>, BatchTxError> {
                let rows = lease_due(conn, limits).await?;
                // a retry runs alone, in a savepoint; retries behind fresh rows wait
                // for a batch of their own (as in the savepoint path)
                if <[InboxRow]>::first(&rows).is_some_and(|row| row.attempts > 0) {
                    return Err(BatchTxError::Redo);
                }
                let rows: Vec<InboxRow> =
                    rows.into_iter().filter(|row| row.attempts == 0).collect();
                let started = Instant::now();
                let mut outcomes = Vec::with_capacity(rows.len());
                let mut processed = Vec::with_capacity(rows.len());
                for row in rows {
                    if !outcomes.is_empty() && started.elapsed() >= limits.budget() {
                        break;
                    }
                    let id = row.id;
                    let Ok(stored) = row.into_delivery() else {
                        return Err(BatchTxError::Redo);
                    };
                    let delivery = stored.delivery();
                    match run_guarded(handler, conn, &delivery, limits.timeout()).await {
                        GuardedRun::Succeeded if !statement_failed(conn) => {
                            processed.push(id);
                            outcomes.push(RowOutcome::processed(&stored));
                        }
                        GuardedRun::Abandoned(reason) => {
                            return Err(BatchTxError::Abandoned {
                                row: Box::new(stored),
                                reason,
                            });
                        }
                        _ => return Err(BatchTxError::Redo),
                    }
                }
                if !processed.is_empty() {
                    conn.batch_execute(&mark_processed(&processed)).await?;
                }
                Ok(outcomes)
            })
            .await;
        match batch {
            Ok(outcomes) => Ok(Some(Batch::Committed(outcomes))),
            Err(BatchTxError::Redo) => {
                // the failed statement, if any, went with the rollback
                forget_failed_statement(conn);
                Ok(None)
            }
            Err(BatchTxError::Abandoned { row, reason }) => {
                Ok(Some(Batch::Abandoned { row, reason }))
            }
            Err(BatchTxError::Db(err)) => Err(MysqlError::query(err)),
        }
    }

    /// The batch transaction (see the module docs).
    async fn run_batch(
        conn: &mut AsyncMysqlConnection,
        handler: &ErasedHandler<'_, AsyncMysqlConnection>,
        limits: BatchLimits,
        retry: &RetryPolicy,
    ) -> Result<Batch, MysqlError> {
        let batch = conn
            .transaction(async |conn| -> Result<Vec<RowOutcome>, BatchTxError> {
                let rows = lease_due(conn, limits).await?;
                // a retry runs alone: what failed or panicked before costs no
                // neighbour anything more (the others are unlocked at commit)
                let rows: Vec<InboxRow> =
                    if <[InboxRow]>::first(&rows).is_some_and(|row| row.attempts > 0) {
                        rows.into_iter().take(1).collect()
                    } else {
                        rows.into_iter().filter(|row| row.attempts == 0).collect()
                    };
                let started = Instant::now();
                let mut outcomes = Vec::with_capacity(rows.len());
                let mut processed = Vec::with_capacity(rows.len());
                // the first row's savepoint; each row's end opens the next one in the
                // same round trip (see `run_row`)
                conn.batch_execute(ROW_SAVEPOINT).await?;
                for row in rows {
                    if !outcomes.is_empty() && started.elapsed() >= limits.budget() {
                        // the rest stay due; their locks go with the commit
                        break;
                    }
                    let (id, attempts) = (row.id, row.attempts);
                    let (key, event_type) = row.facts();
                    let failure = match row.into_delivery() {
                        Ok(stored) => match run_row(conn, handler, &stored, limits).await {
                            Ok(()) => {
                                processed.push(id);
                                outcomes.push(RowOutcome::processed(&stored));
                                continue;
                            }
                            Err(RowTxError::Db(err)) => return Err(err.into()),
                            Err(RowTxError::Handler(GuardedRun::Abandoned(reason))) => {
                                return Err(BatchTxError::Abandoned {
                                    row: Box::new(stored),
                                    reason,
                                });
                            }
                            // the whole cause chain: what an operator reads
                            Err(RowTxError::Handler(GuardedRun::Failed(err))) => format!("{err:#}"),
                            Err(RowTxError::StatementFailed) => {
                                MysqlError::StatementFailed.to_string()
                            }
                            Err(RowTxError::Handler(GuardedRun::Succeeded)) => {
                                unreachable!("a succeeded run is Ok")
                            }
                        },
                        // an unreadable row fails like a handler would, so it ends as a
                        // dead letter instead of blocking the rows behind it (its
                        // savepoint, never used, is closed first)
                        Err(err) => {
                            conn.batch_execute(RELEASE_ROW).await?;
                            error_chain(&err)
                        }
                    };
                    let attempts = u32::try_from(attempts).unwrap_or(0).saturating_add(1);
                    let delay = retry.next_delay(attempts);
                    let dead = retry.is_dead(attempts);
                    // outside any row's savepoint, so no later row's rollback undoes it
                    record_failure(conn, id, attempts, &failure, delay, dead).await?;
                    conn.batch_execute(ROW_SAVEPOINT).await?;
                    let next = OffsetDateTime::now_utc() + delay;
                    let failure = RowFailure::new(attempts, retry, failure, next);
                    outcomes.push(RowOutcome::new(
                        id,
                        key,
                        event_type,
                        RowResult::Failed(failure),
                    ));
                }
                // the last savepoint closed and the processed rows marked, in one
                // round trip (ids are integers: nothing to escape)
                let mut end = String::from(RELEASE_ROW);
                if !processed.is_empty() {
                    end.push_str("; ");
                    end.push_str(&mark_processed(&processed));
                }
                conn.batch_execute(&end).await?;
                Ok(outcomes)
            })
            .await;
        match batch {
            Ok(outcomes) => Ok(Batch::Committed(outcomes)),
            Err(BatchTxError::Abandoned { row, reason }) => Ok(Batch::Abandoned { row, reason }),
            Err(BatchTxError::Db(err)) => Err(MysqlError::query(err)),
            Err(BatchTxError::Redo) => unreachable!("only a batch without savepoints is redone"),
        }
    }

    /// After an abandoned handler: records its failure against its row alone, in a
    /// transaction of its own (the batch's connection was closed, so the server
    /// rolled the batch back and released its rows).
    async fn record_abandoned(
        &self,
        row: &StoredDelivery,
        reason: &Abandoned,
        retry: &RetryPolicy,
    ) -> Result<RowOutcome, MysqlError> {
        use diesel::sql_types::{BigInt, Integer};

        #[derive(QueryableByName)]
        struct Attempts {
            #[diesel(sql_type = Integer)]
            attempts: i32,
        }

        let delay = retry.next_delay(row.attempts.saturating_add(1));
        let error = reason.to_string();
        let recorded = self
            .with_connection(async |conn| {
                conn.transaction(async |conn| {
                    // the row's attempts as committed, locked: MySQL has no
                    // `UPDATE … RETURNING`, and evaluates `SET` left to right
                    let current = diesel::sql_query(
                        "SELECT attempts FROM hookbox_inbox \
                         WHERE id = ? AND processed_at IS NULL AND dead_at IS NULL FOR UPDATE",
                    )
                    .bind::<BigInt, _>(row.id)
                    .get_result::<Attempts>(conn)
                    .await
                    .optional()?;
                    let Some(current) = current else {
                        return Ok(None);
                    };
                    let attempts = u32::try_from(current.attempts)
                        .unwrap_or(0)
                        .saturating_add(1);
                    record_failure(
                        conn,
                        row.id,
                        attempts,
                        &error,
                        delay,
                        retry.is_dead(attempts),
                    )
                    .await?;
                    Ok::<_, diesel::result::Error>(Some(attempts))
                })
                .await
                .map_err(MysqlError::query)
            })
            .await?;
        let Some(attempts) = recorded else {
            // another worker settled the row meanwhile (applied it, or recorded the
            // failure that made it a dead letter): nothing changed here
            return Ok(RowOutcome::failed(
                row,
                RowFailure::not_recorded(row.attempts.saturating_add(1), retry, error),
            ));
        };
        let next = OffsetDateTime::now_utc() + delay;
        Ok(RowOutcome::failed(
            row,
            RowFailure::new(attempts, retry, error, next),
        ))
    }
}

/// Locks up to `limits.rows()` due rows, the next due first. Rows locked by other
/// workers are skipped, not waited for; a worker that dies mid-transaction releases
/// its rows with its connection.
async fn lease_due(
    conn: &mut AsyncMysqlConnection,
    limits: BatchLimits,
) -> Result<Vec<InboxRow>, diesel::result::Error> {
    inbox::table
        .filter(inbox::processed_at.is_null())
        .filter(inbox::dead_at.is_null())
        .filter(inbox::next_attempt_at.le(utc_now()))
        .order((inbox::next_attempt_at.asc(), inbox::id.asc()))
        .limit(i64::from(limits.rows()))
        .for_update()
        .skip_locked()
        .select(InboxRow::as_select())
        .load(conn)
        .await
}

/// The statement marking `ids` processed (integers: nothing to escape).
fn mark_processed(ids: &[i64]) -> String {
    let mut sql =
        String::from("UPDATE hookbox_inbox SET processed_at = UTC_TIMESTAMP(6) WHERE id IN (");
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&id.to_string());
    }
    sql.push(')');
    sql
}

/// The savepoint each row's handler runs in. Named, and managed here rather than by
/// diesel's transaction manager, so that closing one row's savepoint and opening the
/// next's is one round trip instead of two: a handler's own `conn.transaction(…)`
/// nests inside it as diesel's savepoint.
const ROW_SAVEPOINT: &str = "SAVEPOINT hookbox_row";
/// Closes the row's savepoint, keeping what the handler wrote.
const RELEASE_ROW: &str = "RELEASE SAVEPOINT hookbox_row";
/// A row that succeeded: its savepoint released, the next row's opened.
const NEXT_ROW: &str = "RELEASE SAVEPOINT hookbox_row; SAVEPOINT hookbox_row";
/// A row that failed: what its handler wrote undone, its savepoint closed.
const UNDO_ROW: &str = "ROLLBACK TO SAVEPOINT hookbox_row; RELEASE SAVEPOINT hookbox_row";

/// Runs `handler` on one row inside the row's savepoint (opened by the caller). On
/// success the savepoint is released and the next row's opened; on failure the
/// handler's writes are rolled back and no savepoint is open.
async fn run_row(
    conn: &mut AsyncMysqlConnection,
    handler: &ErasedHandler<'_, AsyncMysqlConnection>,
    row: &StoredDelivery,
    limits: BatchLimits,
) -> Result<(), RowTxError> {
    let delivery = row.delivery();
    let ran = match run_guarded(handler, conn, &delivery, limits.timeout()).await {
        GuardedRun::Succeeded if statement_failed(conn) => Err(RowTxError::StatementFailed),
        GuardedRun::Succeeded => Ok(()),
        // a panic or a timeout: the caller drops the connection, the server rolls
        // the whole batch back
        GuardedRun::Abandoned(reason) => {
            return Err(RowTxError::Handler(GuardedRun::Abandoned(reason)));
        }
        other => Err(RowTxError::Handler(other)),
    };
    if ran.is_err() && transaction_aborted(conn) {
        // a deadlock rolled the whole batch back, savepoints included: nothing of it
        // is left to keep, and every row is due again; a transient failure of the
        // batch, as a failed commit
        return Err(RowTxError::Db(batch_deadlocked()));
    }
    match ran {
        Ok(()) => {
            conn.batch_execute(NEXT_ROW).await?;
            Ok(())
        }
        Err(err) => {
            conn.batch_execute(UNDO_ROW).await?;
            // the failed statement is rolled back with the savepoint
            forget_failed_statement(conn);
            Err(err)
        }
    }
}

/// The batch's error after a handler's statement deadlocked: the server's words,
/// so it is classified as the transient deadlock it is.
fn batch_deadlocked() -> diesel::result::Error {
    diesel::result::Error::DatabaseError(
        diesel::result::DatabaseErrorKind::Unknown,
        Box::new(
            "Deadlock found when trying to get lock; the batch's transaction was rolled back"
                .to_string(),
        ),
    )
}

/// Records a handler failure on the locked row; the caller's transaction commits it.
async fn record_failure(
    conn: &mut AsyncMysqlConnection,
    id: i64,
    attempts: u32,
    message: &str,
    delay: std::time::Duration,
    dead: bool,
) -> Result<(), diesel::result::Error> {
    use diesel::sql_types::{BigInt, Bool, Integer, Text};
    diesel::sql_query(
        "UPDATE hookbox_inbox SET attempts = ?, last_error = ?, \
           next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, \
           dead_at = CASE WHEN ? THEN UTC_TIMESTAMP(6) END \
         WHERE id = ?",
    )
    .bind::<Integer, _>(i32::try_from(attempts).unwrap_or(i32::MAX))
    .bind::<Text, _>(message)
    .bind::<BigInt, _>(i64::try_from(delay.as_micros()).unwrap_or(i64::MAX))
    .bind::<Bool, _>(dead)
    .bind::<BigInt, _>(id)
    .execute(conn)
    .await?;
    Ok(())
}
