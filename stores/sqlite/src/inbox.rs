//! The inbox and its worker on SQLite: a lease per row instead of `SKIP LOCKED`.
//!
//! [`Inbox::work_one`] runs two `BEGIN IMMEDIATE` transactions:
//!
//! 1. **lease** (short): pick the first due row that no live lease holds, count the
//!    attempt, and write a random `lease_token` with `leased_until = now + lease`.
//!    Other workers, in this process or another one on the same file, skip it until
//!    the lease expires.
//! 2. **work**: check the token is still ours, run the handler inside a savepoint,
//!    then either set `processed_at` (and un-count the attempt) or roll the savepoint
//!    back and record the failure; clear the lease; commit. If the lease ran out
//!    while this worker waited for the lock and another worker took the row, the
//!    handler does not run and `work_one` reports [`Worked::Idle`].
//!
//! The attempt is counted at lease time, so a poison event that kills the whole
//! process still reaches the dead-letter limit: each crash leaves an expired lease
//! (counted), and when the next worker finds an expired lease on a row already at
//! the limit it dead-letters the row instead of running it again.

use std::time::{Duration, Instant};

use diesel::OptionalExtension as _;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::sqlite::SqliteConnection;
use diesel_async::{AsyncConnection as _, RunQueryDsl as _, SimpleAsyncConnection as _};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    BoxFuture, ErasedHandler, Inbox, InboxFilter, InboxStats, Received, StoredDelivery,
    VerifiedDelivery, Worked,
};

use crate::connect::Conn;
use crate::error::{SqliteError, TxError};
use crate::options::SqliteOptions;
use crate::pool::PooledConnection;
use crate::rows::{InboxRow, duration_micros, from_micros, micros};
use crate::sql;
use crate::store::SqliteStore;
use crate::writer::{InboxInsert, received};

/// `last_error` for an attempt whose worker stopped before it finished.
const INTERRUPTED: &str = "the worker stopped before finishing this row (crash, kill or cancelled future); its lease expired";

/// What the lease transaction found.
enum Lease {
    /// No row is due.
    Idle,
    /// The row is ours until the lease expires.
    Taken(Box<StoredDelivery>),
    /// The row was dead-lettered without running (its earlier attempts all died
    /// with their worker, or it cannot be read back).
    Dead { id: i64, attempts: u32 },
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

#[derive(diesel::QueryableByName)]
struct Stats {
    #[diesel(sql_type = BigInt)]
    pending: i64,
    #[diesel(sql_type = BigInt)]
    processed: i64,
    #[diesel(sql_type = BigInt)]
    dead: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    oldest_pending: Option<i64>,
}

fn now() -> i64 {
    micros(OffsetDateTime::now_utc())
}

impl SqliteStore {
    /// The lease transaction (see the module docs), in one trip to tokio's blocking
    /// pool: it runs no user code, so its four statements need not cross between
    /// threads one by one, and the write lock is held for less time.
    async fn take_lease(&self, conn: &mut Conn, token: i64) -> Result<Lease, SqliteError> {
        let retry = self.inner.options.retry;
        let lease = duration_micros(self.inner.options.lease);
        conn.spawn_blocking(move |conn: &mut SqliteConnection| {
            Ok(conn.immediate_transaction(|conn| lease::take_lease_on(conn, token, retry, lease)))
        })
        .await
        .map_err(SqliteError::from_diesel)?
    }

    /// The work transaction (see the module docs).
    async fn run_handler(
        &self,
        conn: &mut Conn,
        token: i64,
        row: &StoredDelivery,
        handler: &ErasedHandler<'_, Conn>,
    ) -> Result<Worked, SqliteError> {
        let retry = self.inner.options.retry;
        let id = row.id;
        // the failure this attempt would be, counted at lease time
        let attempts = row.attempts + 1;
        // the view an inline handler gets too, with this attempt's number
        let delivery = row.delivery();
        conn.immediate_transaction(async |conn: &mut Conn| -> Result<Worked, SqliteError> {
            // the lease may have run out while this worker waited for the write
            // lock, and another worker taken the row: then it is not ours to run
            let ours = diesel::sql_query(sql::LEASE_IS_OURS)
                .bind::<BigInt, _>(id)
                .bind::<BigInt, _>(token)
                .get_result::<Count>(conn)
                .await?;
            if ours.count == 0 {
                return Ok(Worked::Idle);
            }
            // a savepoint: a handler error rolls back the handler's writes only, and
            // the failure is recorded in the same transaction as the lease release
            let handled = conn
                .transaction(async |conn: &mut Conn| {
                    handler(conn, &delivery).await.map_err(TxError::User)
                })
                .await;
            let now = now();
            match handled {
                Ok(()) => {
                    diesel::sql_query(sql::MARK_PROCESSED)
                        .bind::<BigInt, _>(now)
                        .bind::<BigInt, _>(id)
                        .execute(conn)
                        .await?;
                    Ok(Worked::Processed { id })
                }
                Err(TxError::User(err)) => {
                    let dead = retry.is_dead(attempts);
                    let next = now.saturating_add(duration_micros(retry.next_delay(attempts)));
                    diesel::sql_query(sql::RECORD_FAILURE)
                        // the whole cause chain: what an operator needs to see
                        .bind::<Text, _>(format!("{err:#}"))
                        .bind::<BigInt, _>(next)
                        .bind::<Nullable<BigInt>, _>(dead.then_some(now))
                        .bind::<BigInt, _>(id)
                        .execute(conn)
                        .await?;
                    Ok(Worked::Failed { id, attempts, dead })
                }
                Err(TxError::Db(err)) => Err(SqliteError::from_diesel(err)),
            }
        })
        .await
    }
}

impl SqliteStore {
    /// Inserts one inbox row in autocommit on a pooled connection, as per-request
    /// commit does; with `synchronous = FULL` the row is on disk (WAL fsynced) when
    /// it returns. With [`Read::First`] a stored key is answered from a read
    /// instead, in the same trip to the blocking pool. The insert waits for the
    /// write lock in sub-millisecond steps, not SQLite's busy sleeps
    /// ([`InboxInsert::insert_waiting_for_lock`]).
    async fn insert_alone(&self, row: InboxInsert, read: Read) -> Result<Received, SqliteError> {
        let mut conn = self.connection().await?;
        let deadline = Instant::now() + self.inner.options.busy_timeout;
        let busy_timeout = self.inner.options.busy_timeout_pragma();
        let (outcome, restored) = conn
            .spawn_blocking(move |conn: &mut SqliteConnection| {
                if read == Read::First && row.is_stored_on(conn)? {
                    return Ok((Ok(Received::Duplicate), true));
                }
                let (inserted, restored) =
                    row.insert_waiting_for_lock(conn, deadline, &busy_timeout);
                Ok((inserted.map(received), restored))
            })
            .await?;
        if !restored {
            conn.discard();
        }
        outcome.map_err(SqliteError::from)
    }

    /// `work_one` on a relaxed connection: the lease transaction, then the work
    /// transaction, each retried while another connection holds the write lock.
    async fn lease_and_run(
        &self,
        conn: &mut Conn,
        handler: &ErasedHandler<'_, Conn>,
    ) -> Result<Worked, SqliteError> {
        let token = fastrand::i64(..);
        let deadline = Instant::now() + self.inner.options.busy_timeout;
        let lease = loop {
            match self.take_lease(conn, token).await {
                Err(SqliteError::Busy(_)) if Instant::now() < deadline => wait_for_lock().await,
                lease => break lease?,
            }
        };
        let row = match lease {
            Lease::Idle => return Ok(Worked::Idle),
            Lease::Dead { id, attempts } => {
                return Ok(Worked::Failed {
                    id,
                    attempts,
                    dead: true,
                });
            }
            Lease::Taken(row) => row,
        };
        loop {
            // a refused `BEGIN IMMEDIATE` ran nothing; the handler runs only once
            // the lock is held, and what it did is rolled back with any error
            match self.run_handler(conn, token, &row, handler).await {
                Err(SqliteError::Busy(_)) if Instant::now() < deadline => wait_for_lock().await,
                worked => return worked,
            }
        }
    }
}

/// Whether a lone receive reads its key before it inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Group commit: a duplicate never takes the write lock.
    First,
    /// Per-request commit: the insert alone, as it always was.
    No,
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

impl Inbox for SqliteStore {
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, SqliteError>> {
        Box::pin(async move {
            let key = delivery.dedupe_key();
            let row = InboxInsert {
                scope: key.scope(),
                provider: key.provider().to_string(),
                delivery_id: key.delivery_id().to_string(),
                tenant: key.tenant().map(str::to_string),
                event_type: delivery.event_type().map(str::to_string),
                correlation_id: delivery.correlation_id().map(str::to_string),
                signed_at: delivery.signed_at().map(micros),
                body: delivery.body().clone(),
                headers: delivery.headers().to_json(),
                now: now(),
            };
            let Some(writer) = &self.inner.writer else {
                return self.insert_alone(row, Read::No).await;
            };
            let in_flight = writer.enter();
            if in_flight.alone() {
                // a stored key is still answered from a read, without the write lock
                let outcome = self.insert_alone(row, Read::First).await;
                if matches!(outcome, Ok(Received::Stored)) {
                    writer.committed_alone();
                }
                return outcome;
            }
            // group commit: a copy already stored is answered from the lookup
            // thread's read, the rest are committed in batches (see `writer`)
            writer.write(row).await
        })
    }

    fn work_one_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, Conn>,
    ) -> BoxFuture<'a, Result<Worked, SqliteError>> {
        Box::pin(async move {
            let mut conn = WorkerConn::relax(self.connection().await?).await?;
            let worked = self.lease_and_run(&mut conn, handler).await;
            conn.restore(&self.inner.options).await;
            worked
        })
    }

    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, SqliteError>> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let row = diesel::sql_query(sql::GET)
                .bind::<BigInt, _>(id)
                .get_result::<InboxRow>(&mut *conn)
                .await
                .optional()?;
            row.map(InboxRow::into_delivery).transpose()
        })
    }

    // operators' `hookbox inbox list`; a row that cannot be read back fails the
    // whole list with `SqliteError::Corrupt`, naming its id
    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, SqliteError>> {
        let sql = match filter {
            InboxFilter::Pending => sql::LIST_PENDING,
            InboxFilter::Processed => sql::LIST_PROCESSED,
            InboxFilter::Dead => sql::LIST_DEAD,
            InboxFilter::All => sql::LIST_ALL,
        };
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let rows = diesel::sql_query(sql)
                .bind::<BigInt, _>(i64::from(limit))
                .load::<InboxRow>(&mut *conn)
                .await?;
            rows.into_iter().map(InboxRow::into_delivery).collect()
        })
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, SqliteError>> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let replayed = diesel::sql_query(sql::REPLAY)
                .bind::<BigInt, _>(now())
                .bind::<BigInt, _>(id)
                .execute(&mut *conn)
                .await?;
            Ok(replayed == 1)
        })
    }

    fn replay_all(&self) -> BoxFuture<'_, Result<u64, SqliteError>> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let replayed = diesel::sql_query(sql::REPLAY_ALL)
                .bind::<BigInt, _>(now())
                .execute(&mut *conn)
                .await?;
            Ok(replayed as u64)
        })
    }

    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, SqliteError>> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let stats = diesel::sql_query(sql::STATS)
                .get_result::<Stats>(&mut *conn)
                .await?;
            let count = |n: i64| u64::try_from(n).unwrap_or(0);
            Ok(InboxStats {
                pending: count(stats.pending),
                processed: count(stats.processed),
                dead: count(stats.dead),
                oldest_pending: stats.oldest_pending.and_then(from_micros),
            })
        })
    }
}

/// The lease transaction, synchronous: it runs whole on the blocking pool's thread.
mod lease {
    use diesel::sql_types::{BigInt, Text};
    use diesel::sqlite::SqliteConnection;
    use diesel::{OptionalExtension as _, RunQueryDsl as _};
    use hookbox_core::RetryPolicy;

    use super::{Count, INTERRUPTED, Lease, now};
    use crate::error::SqliteError;
    use crate::rows::InboxRow;
    use crate::sql;

    /// The lease transaction's statements, inside its `BEGIN IMMEDIATE`.
    pub(super) fn take_lease_on(
        conn: &mut SqliteConnection,
        token: i64,
        retry: RetryPolicy,
        lease: i64,
    ) -> Result<Lease, SqliteError> {
        let now = now();
        let row = diesel::sql_query(sql::DUE_ROW)
            .bind::<BigInt, _>(now)
            .get_result::<InboxRow>(conn)
            .optional()?;
        let Some(row) = row else {
            return Ok(Lease::Idle);
        };
        let id = row.id();
        let interrupted = row.was_interrupted();
        if interrupted && retry.is_dead(row.attempts()) {
            // every attempt so far died with its worker: stop feeding it workers
            let attempts = row.attempts();
            dead_letter(conn, id, INTERRUPTED, now, false)?;
            return Ok(Lease::Dead { id, attempts });
        }
        let mut delivery = match row.into_delivery() {
            Ok(delivery) => delivery,
            Err(err) => {
                // retrying cannot repair the row: dead-letter it so it never blocks the
                // rows behind it, and say why
                dead_letter(conn, id, &err.to_string(), now, true)?;
                let count = diesel::sql_query(sql::ATTEMPTS)
                    .bind::<BigInt, _>(id)
                    .get_result::<Count>(conn)?;
                let attempts = u32::try_from(count.count).unwrap_or(0);
                return Ok(Lease::Dead { id, attempts });
            }
        };
        if interrupted {
            delivery.last_error = Some(INTERRUPTED.to_string());
        }
        diesel::sql_query(sql::TAKE_LEASE)
            .bind::<BigInt, _>(now.saturating_add(lease))
            .bind::<BigInt, _>(token)
            .bind::<Text, _>(INTERRUPTED)
            .bind::<BigInt, _>(id)
            .execute(conn)?;
        Ok(Lease::Taken(Box::new(delivery)))
    }

    /// Makes row `id` a dead letter now, clearing its lease.
    fn dead_letter(
        conn: &mut SqliteConnection,
        id: i64,
        reason: &str,
        now: i64,
        count_attempt: bool,
    ) -> Result<(), SqliteError> {
        diesel::sql_query(sql::DEAD_LETTER)
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(reason)
            .bind::<BigInt, _>(i64::from(count_attempt))
            .bind::<BigInt, _>(id)
            .execute(conn)?;
        Ok(())
    }
}
