//! The inbox's worker on SQLite, the batched path behind
//! [`Inbox::work_batch`](hookbox_core::Inbox::work_batch): a lease per batch instead
//! of `SKIP LOCKED`, a savepoint per row, and the failures recorded.
//!
//! A batch runs two `BEGIN IMMEDIATE` transactions:
//!
//! 1. **lease** (short, one trip to the blocking pool): pick up to N due rows that
//!    no live lease holds, count their attempt, and write a random `lease_token`
//!    with `leased_until = now + lease`. Other workers, in this process or another
//!    one on the same file, skip them until the lease expires.
//! 2. **work**: read which of them the token still holds, run each handler inside
//!    its own savepoint, then either mark the row processed (un-counting the
//!    attempt) or roll the savepoint back and record the failure; once the batch's
//!    time budget is spent, start no further row and release the rest (due again at
//!    once, attempt un-counted); commit once. The write lock is held from the first
//!    handler to the commit, so the budget bounds how long the edge's inserts wait.
//!
//! A row runs in a batch on its first attempt only: a retry (a row that failed,
//! panicked, timed out or was interrupted before) is leased alone, so a poison row
//! costs its neighbours at most one redo.
//!
//! The attempt is counted at lease time, so a poison event that kills the whole
//! process still reaches the dead-letter limit: each crash leaves expired leases
//! (counted), and each row of the crashed batch is then retried alone, so a row that
//! kills its worker is charged its own attempts while its neighbours succeed on
//! their own. When the next worker finds an expired lease on a row already at the
//! limit it dead-letters the row instead of running it again.
//!
//! A handler that panics or outruns its row timeout is abandoned: the work
//! transaction rolls back (its connection is closed, never reused), and a third
//! transaction records the failure against that row and releases the others.

mod lease;

use std::time::{Duration, Instant};

use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::sqlite::SqliteConnection;
use diesel_async::{AsyncConnection as _, RunQueryDsl as _, SimpleAsyncConnection as _};
use hookbox_core::spi::{
    Abandoned, ErasedHandler, GuardedRun, RowFailure, RowOutcome, run_guarded,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{BatchLimits, RetryPolicy, StoredDelivery};

use self::lease::{Count, Leased, id_list};
use crate::connect::Conn;
use crate::error::SqliteError;
use crate::options::SqliteOptions;
use crate::pool::PooledConnection;
use crate::rows::{duration_micros, micros, now};
use crate::runner;
use crate::store::SqliteStore;
use crate::transaction::ImmediateTransaction as _;

/// How a work transaction ended without committing its handlers' writes.
enum BatchTxError {
    Db(diesel::result::Error),
    /// The handler of `rows[index]` panicked or outran its timeout.
    Abandoned {
        index: usize,
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
    Handler(GuardedRun),
}

impl From<diesel::result::Error> for RowTxError {
    fn from(err: diesel::result::Error) -> Self {
        Self::Db(err)
    }
}

/// What a work transaction did.
enum Work {
    Committed(Vec<RowOutcome>),
    Abandoned { index: usize, reason: Abandoned },
}

/// Which of the ids that follow a lease token still holds, as `count`. Binds: token.
/// (By id, not by token alone: `lease_token` has no index, and a scan of the whole
/// inbox per batch cost more than the batch.)
const LEASED_TO: &str = "SELECT id AS count FROM hookbox_inbox \
     WHERE lease_token = ? AND processed_at IS NULL AND id IN ";

/// The handlers succeeded: processed, the attempt un-counted, the lease cleared, for
/// the ids that follow while `token` holds them. Binds: processed_at, token.
const MARK_PROCESSED: &str = "UPDATE hookbox_inbox SET processed_at = ?1, \
     attempts = attempts - 1, leased_until = NULL, lease_token = NULL \
     WHERE lease_token = ?2 AND id IN ";

impl SqliteStore {
    /// `work_batch` (see the module docs): a relaxed connection ([`WorkerConn`]),
    /// the lease and work transactions, and an abandoned handler's failure recorded
    /// on a connection of its own.
    pub(crate) async fn run_work_batch(
        &self,
        handler: &ErasedHandler<'_, Conn>,
        limits: BatchLimits,
    ) -> Result<Vec<RowOutcome>, SqliteError> {
        let token = fastrand::i64(..);
        let mut conn = WorkerConn::relax(self.connection().await?).await?;
        let batch = self.lease_and_run(&mut conn, token, handler, limits).await;
        let Ok(Batch {
            mut outcomes,
            leased,
            abandoned: Some((row, reason)),
        }) = batch
        else {
            conn.restore(&self.inner.options).await;
            return batch.map(|batch| batch.outcomes);
        };
        // the abandoned handler may have left the connection mid-statement or in
        // a transaction of its own: close it (SQLite rolls back) before the
        // failure is recorded on another connection
        drop(conn);
        outcomes.push(self.record_abandoned(token, &leased, &row, &reason).await?);
        Ok(outcomes)
    }

    /// The lease transaction (see the module docs), in one trip to tokio's blocking
    /// pool: it runs no user code, so its statements need not cross between threads
    /// one by one, and the write lock is held for less time.
    async fn take_leases(
        &self,
        conn: &mut Conn,
        token: i64,
        max_rows: u32,
    ) -> Result<Leased, SqliteError> {
        let retry = self.inner.options.retry;
        let lease = duration_micros(self.inner.options.lease);
        conn.spawn_blocking(move |conn: &mut SqliteConnection| {
            Ok(conn.immediate_transaction(|conn| {
                lease::take_leases_on(conn, token, &retry, lease, max_rows)
            }))
        })
        .await
        .map_err(SqliteError::from_diesel)?
    }

    /// The work transaction (see the module docs).
    async fn run_batch(
        &self,
        conn: &mut Conn,
        token: i64,
        rows: &[StoredDelivery],
        handler: &ErasedHandler<'_, Conn>,
        limits: BatchLimits,
    ) -> Result<Work, SqliteError> {
        let retry = self.inner.options.retry;
        let worked = conn
            .immediate_transaction(async |conn: &mut Conn| -> Result<_, BatchTxError> {
                // the lock is held from here to the commit: every statement runs on
                // this task's thread (`runner`), the commit on the blocking pool
                runner::inline(async move {
                    let started = Instant::now();
                    // a lease may have run out while this worker waited for the write
                    // lock, and another worker taken the row: then it is not ours to run
                    let leased = rows.iter().map(|row| row.id);
                    let ours: Vec<i64> =
                        diesel::sql_query(format!("{}{}", LEASED_TO, id_list(leased.clone())))
                            .bind::<BigInt, _>(token)
                            .load::<Count>(conn)
                            .await?
                            .into_iter()
                            .map(|row| row.count)
                            .collect();
                    let mut outcomes = Vec::with_capacity(rows.len());
                    let mut processed = Vec::with_capacity(rows.len());
                    for (index, row) in rows.iter().enumerate() {
                        if !ours.contains(&row.id) {
                            continue;
                        }
                        if !outcomes.is_empty() {
                            if started.elapsed() >= limits.budget() {
                                // the rest are released below, due again at once
                                break;
                            }
                            // the statements run on this thread: between rows, let
                            // the tasks queued behind this one (the edge's, in the
                            // same process) run, so none waits for a whole batch
                            tokio::task::yield_now().await;
                        }
                        // the view an inline handler gets too, with this attempt's number
                        let delivery = row.delivery();
                        // a savepoint: a handler error rolls back the handler's writes
                        // only, and the failure is recorded in this transaction
                        let ran = conn
                            .transaction(async |conn: &mut Conn| -> Result<(), RowTxError> {
                                match run_guarded(handler, conn, &delivery, limits.timeout()).await
                                {
                                    GuardedRun::Succeeded => Ok(()),
                                    other => Err(RowTxError::Handler(other)),
                                }
                            })
                            .await;
                        match ran {
                            Ok(()) => {
                                processed.push(row.id);
                                outcomes.push(RowOutcome::processed(row));
                            }
                            Err(RowTxError::Db(err)) => return Err(err.into()),
                            Err(RowTxError::Handler(GuardedRun::Abandoned(reason))) => {
                                return Err(BatchTxError::Abandoned { index, reason });
                            }
                            Err(RowTxError::Handler(GuardedRun::Failed(err))) => {
                                // the whole cause chain: what an operator needs to see
                                let failure =
                                    record_failure(conn, row, token, &retry, format!("{err:#}"))
                                        .await?;
                                outcomes.push(RowOutcome::failed(row, failure));
                            }
                            Err(RowTxError::Handler(GuardedRun::Succeeded)) => {
                                unreachable!("a succeeded run is Ok")
                            }
                        }
                    }
                    if !processed.is_empty() {
                        diesel::sql_query(format!("{}{}", MARK_PROCESSED, id_list(processed)))
                            .bind::<BigInt, _>(now())
                            .bind::<BigInt, _>(token)
                            .execute(conn)
                            .await?;
                    }
                    release_leases(conn, token, leased).await?;
                    Ok::<_, BatchTxError>(outcomes)
                })
                .await
            })
            .await;
        match worked {
            Ok(outcomes) => Ok(Work::Committed(outcomes)),
            Err(BatchTxError::Abandoned { index, reason }) => Ok(Work::Abandoned { index, reason }),
            Err(BatchTxError::Db(err)) => Err(SqliteError::from_diesel(err)),
        }
    }

    /// After an abandoned handler: records its failure against its row and releases
    /// the batch's other rows, on a connection of its own (the work transaction's
    /// was closed with the transaction open, so SQLite rolled it back).
    async fn record_abandoned(
        &self,
        token: i64,
        batch: &[i64],
        row: &StoredDelivery,
        reason: &Abandoned,
    ) -> Result<RowOutcome, SqliteError> {
        let retry = self.inner.options.retry;
        let deadline = Instant::now() + self.inner.options.busy_timeout;
        let mut conn = self.connection().await?;
        loop {
            let recorded = conn
                .immediate_transaction(
                    async |conn: &mut Conn| -> Result<_, diesel::result::Error> {
                        // the failure first: it clears the row's lease, so the release
                        // that follows hands back only the rows that never ran (their
                        // attempt returned, due at once)
                        let failure =
                            record_failure(conn, row, token, &retry, reason.to_string()).await?;
                        release_leases(conn, token, batch.iter().copied()).await?;
                        Ok(failure)
                    },
                )
                .await
                .map_err(SqliteError::from_diesel);
            match recorded {
                Err(SqliteError::Busy(_)) if Instant::now() < deadline => wait_for_lock().await,
                recorded => return recorded.map(|failure| RowOutcome::failed(row, failure)),
            }
        }
    }

    /// `work_batch` on a relaxed connection: the lease transaction, then the work
    /// transaction, each retried while another connection holds the write lock.
    async fn lease_and_run(
        &self,
        conn: &mut Conn,
        token: i64,
        handler: &ErasedHandler<'_, Conn>,
        limits: BatchLimits,
    ) -> Result<Batch, SqliteError> {
        let deadline = Instant::now() + self.inner.options.busy_timeout;
        let leased = loop {
            match self.take_leases(conn, token, limits.rows()).await {
                Err(SqliteError::Busy(_)) if Instant::now() < deadline => wait_for_lock().await,
                leased => break leased?,
            }
        };
        let mut batch = Batch {
            outcomes: leased.dead,
            leased: Vec::new(),
            abandoned: None,
        };
        if leased.rows.is_empty() {
            return Ok(batch);
        }
        loop {
            // a refused `BEGIN IMMEDIATE` ran nothing; the handlers run only once
            // the lock is held, and what they did is rolled back with any error
            match self
                .run_batch(conn, token, &leased.rows, handler, limits)
                .await
            {
                Err(SqliteError::Busy(_)) if Instant::now() < deadline => wait_for_lock().await,
                Err(err) => {
                    // nothing of the batch committed: hand its rows back now rather
                    // than when their lease expires (if this fails too, they come
                    // back then)
                    let _ = conn
                        .immediate_transaction(async |conn: &mut Conn| {
                            release_leases(conn, token, leased.rows.iter().map(|row| row.id)).await
                        })
                        .await;
                    return Err(err);
                }
                Ok(Work::Committed(done)) => {
                    batch.outcomes.extend(done);
                    return Ok(batch);
                }
                Ok(Work::Abandoned { index, reason }) => {
                    let mut rows = leased.rows;
                    batch.leased = rows.iter().map(|row| row.id).collect();
                    batch.abandoned = Some((rows.swap_remove(index), reason));
                    return Ok(batch);
                }
            }
        }
    }
}

/// What `lease_and_run` did.
struct Batch {
    /// Rows whose outcome is committed.
    outcomes: Vec<RowOutcome>,
    /// The ids of the rows the batch leased, when a handler was abandoned (the
    /// others are released with its failure).
    leased: Vec<i64>,
    /// The row whose handler was abandoned, when one was: nothing of the work
    /// transaction committed, and its connection must not be reused.
    abandoned: Option<(StoredDelivery, Abandoned)>,
}

/// The handler failed: the error, the next attempt, maybe dead; the lease cleared,
/// while `token` holds the row. Binds: last_error, next_attempt_at, dead_at, id, token.
const RECORD_FAILURE: &str = "UPDATE hookbox_inbox SET last_error = ?, \
     next_attempt_at = ?, dead_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE id = ? AND lease_token = ?";

/// Records the failure of `row`'s handler while `token` holds it: the error, the next
/// attempt by `retry` (or a dead letter at the limit), the lease cleared. The
/// attempt was counted when the row was leased.
async fn record_failure(
    conn: &mut Conn,
    row: &StoredDelivery,
    token: i64,
    retry: &RetryPolicy,
    error: String,
) -> Result<RowFailure, diesel::result::Error> {
    let attempts = row.attempts + 1;
    let now = OffsetDateTime::now_utc();
    let next = now + retry.next_delay(attempts);
    let failure = RowFailure::new(attempts, retry, error, next);
    diesel::sql_query(RECORD_FAILURE)
        .bind::<Text, _>(&failure.error)
        .bind::<BigInt, _>(micros(next))
        .bind::<Nullable<BigInt>, _>(failure.dead.then_some(micros(now)))
        .bind::<BigInt, _>(row.id)
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    Ok(failure)
}

/// Of the ids that follow, the rows a lease token still holds that the batch did not
/// start: due again now with the attempt un-counted and the lease cleared. Binds:
/// now, token.
const RELEASE_LEASES: &str = "UPDATE hookbox_inbox SET attempts = attempts - 1, \
     next_attempt_at = ?1, leased_until = NULL, lease_token = NULL \
     WHERE lease_token = ?2 AND processed_at IS NULL AND id IN ";

/// Hands back every row of `ids` that `token` still holds: due now, the attempt
/// un-counted.
async fn release_leases(
    conn: &mut Conn,
    token: i64,
    ids: impl IntoIterator<Item = i64>,
) -> Result<(), diesel::result::Error> {
    diesel::sql_query(format!("{}{}", RELEASE_LEASES, id_list(ids)))
        .bind::<BigInt, _>(now())
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    Ok(())
}

/// How long a worker waits before it tries for the write lock again: tokio's timer
/// tick, the finest an async task can sleep.
async fn wait_for_lock() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// The worker's connection during one `work_one`: `synchronous = NORMAL` and no
/// busy handler, put back before the connection returns to the pool (it is closed
/// instead when that fails or the future is dropped first).
///
/// `NORMAL`: the worker's commits (a lease, a handler's writes with the row marked
/// processed) skip the fsync, so each holds SQLite's one write lock for
/// microseconds instead of a disk flush, and the edge's acknowledgements wait
/// less behind them. Nothing acknowledged rests on them: a power cut can take back
/// only the last such commits, each whole (a handler's writes with their mark), so
/// the row is worked again as if the worker had crashed, and every commit that
/// follows with `FULL` (the edge's inserts) flushes the WAL before it, theirs
/// included. No busy handler: SQLite's sleeps 1, 2, 5, 10… ms between tries, which
/// starves a worker beside a busy edge; [`wait_for_lock`] tries every millisecond.
struct WorkerConn {
    conn: Option<PooledConnection>,
}

impl WorkerConn {
    async fn relax(mut conn: PooledConnection) -> Result<Self, SqliteError> {
        let relaxed = conn
            .batch_execute("PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 0;")
            .await;
        let conn = Self { conn: Some(conn) };
        // on failure `conn` is dropped unrestored, and so closed
        relaxed?;
        Ok(conn)
    }

    /// Puts the store's settings back and returns the connection to the pool, or
    /// closes it when that fails.
    async fn restore(mut self, options: &SqliteOptions) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let restored = conn
            .batch_execute(&format!(
                "PRAGMA synchronous = {}; {}",
                options.synchronous.pragma(),
                options.busy_timeout_pragma()
            ))
            .await;
        if restored.is_err() {
            conn.discard();
        }
    }
}

impl std::ops::Deref for WorkerConn {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        // `conn` is `None` only after `restore` or inside `drop`
        self.conn.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl std::ops::DerefMut for WorkerConn {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn.as_deref_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for WorkerConn {
    fn drop(&mut self) {
        // dropped before `restore`: never back to the pool with the worker's settings
        if let Some(conn) = self.conn.take() {
            conn.discard();
        }
    }
}
