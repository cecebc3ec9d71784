//! Group commit for the inbox: two threads per store, each with a connection of its
//! own, between `Inbox::receive` and the disk.
//!
//! 1. **lookup**: takes every receive that is waiting and answers each whose key is
//!    already stored from a read (under WAL a reader never waits for the writer, and
//!    a duplicate writes nothing); the rest go on to the writer. A delivery alone
//!    in the queue while the writer is idle it writes itself, in autocommit.
//! 2. **writer**: takes every insert that is waiting, writes them in one
//!    transaction, commits once, and only then answers each caller.
//!
//! A receive with no other in flight (low load) skips both threads: on a pooled
//! connection it reads its key (a duplicate is answered without the write lock) and
//! writes its row as per-request commit does, so one sender is not slowed by two
//! thread hand-offs; receives that arrive meanwhile queue and are batched.
//!
//! SQLite has one write lock per file and, at `synchronous = FULL`, one `fsync` per
//! commit: a commit per delivery caps the edge at the disk's fsync rate whatever the
//! concurrency. Here a batch is whatever queued while the previous commit ran (no
//! timer): one delivery at low load, hundreds under load. Neither stage goes through
//! the pool or tokio's blocking pool, so a delivery costs two queue hand-offs and no
//! per-request thread trip.
//!
//! Guarantees, per delivery, the same as a commit of its own:
//! - a caller is answered `Stored` or `Duplicate` only after the `COMMIT` that holds
//!   its row (or the row a read found) returned;
//! - a row that fails (too large, a constraint) fails its caller only and the rest
//!   of the batch commits: the batch is then rolled back and written again with each
//!   row in a savepoint;
//! - if `BEGIN` or `COMMIT` fails, every caller of the batch gets the error and
//!   nothing of the batch is stored (the sender retries each).
//!
//! The writer waits for the write lock itself, in steps of at most
//! [`MAX_LOCK_PAUSE`], instead of through SQLite's busy handler, which sleeps 1, 2,
//! 5, 10… ms between tries: while a worker's transaction holds the lock, the edge's
//! acknowledgements wait for that transaction and not for a sleep on top of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection as _;
use diesel::sqlite::SqliteConnection;
use diesel::{OptionalExtension as _, QueryResult, RunQueryDsl as _};
use hookbox_core::bytes::Bytes;
use hookbox_core::spi::{CommitCounts, GroupCommit, InFlight, ReceivesInFlight};
use hookbox_core::{GroupCommitStats, Received};
use tokio::sync::{mpsc, oneshot};

use crate::error::{SqliteError, is_locked};
use crate::options::SqliteOptions;
use crate::rows::{InboxHas, ReceiveRow};

/// The longest the writer sleeps between two tries for the write lock.
const MAX_LOCK_PAUSE: Duration = Duration::from_micros(500);

/// Batches the lookup thread may hand the writer ahead of the one it is writing; past
/// it the lookup thread waits, its own queue (`queue_depth`) fills, and callers get
/// [`SqliteError::Overloaded`] after the queue timeout. At most `queue_depth` jobs and
/// three batches wait in all (queued, in the lookup's hand, the writer's), and the
/// writer's leftover: it takes whole handed-over batches until it has `max_batch`
/// jobs, so up to `max_batch - 1` of them wait for its next commit.
const WRITE_QUEUE_BATCHES: usize = 1;

/// What a caller gets when a stage's thread is gone (the store is being dropped).
const STOPPED: SqliteError = SqliteError::Config("the inbox writer thread stopped");

/// One inbox row to insert, owned so it can cross to the stage threads.
#[derive(Debug)]
pub(crate) struct InboxInsert {
    pub(crate) scope: String,
    pub(crate) provider: String,
    pub(crate) delivery_id: String,
    pub(crate) tenant: Option<String>,
    pub(crate) event_type: Option<String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) signed_at: Option<i64>,
    pub(crate) body: Bytes,
    pub(crate) headers: String,
    pub(crate) now: i64,
}

impl InboxInsert {
    /// Runs the insert on `conn`; `true` when a row was inserted, `false` when the
    /// key was stored already.
    pub(crate) fn insert_on(&self, conn: &mut SqliteConnection) -> QueryResult<bool> {
        let inserted = ReceiveRow {
            source: &self.scope,
            provider: &self.provider,
            delivery_id: &self.delivery_id,
            tenant: self.tenant.as_deref(),
            event_type: self.event_type.as_deref(),
            correlation_id: self.correlation_id.as_deref(),
            signed_at: self.signed_at,
            body: &self.body,
            headers: &self.headers,
            received_at: self.now,
        }
        .execute(conn)?;
        Ok(inserted == 1)
    }

    /// Runs the insert on a pooled `conn` (whose busy handler is the store's), waiting
    /// for the write lock as the stages do, in steps of at most [`MAX_LOCK_PAUSE`]
    /// until `deadline`, instead of through SQLite's busy handler: its sleeps of 1, 2,
    /// 5 … 100 ms held a lone receive up to a second behind a batch's commit. The
    /// handler is put back (`busy_timeout_pragma`) before it returns.
    ///
    /// Returns the insert's outcome and whether the handler was put back: when not,
    /// the caller must close the connection rather than return it to the pool.
    pub(crate) fn insert_waiting_for_lock(
        &self,
        conn: &mut SqliteConnection,
        deadline: Instant,
        busy_timeout_pragma: &str,
    ) -> (QueryResult<bool>, bool) {
        if let Err(err) = conn.batch_execute("PRAGMA busy_timeout = 0") {
            // nothing changed: the connection still has the store's handler
            return (Err(err), true);
        }
        let inserted = retry_while_locked(deadline, || self.insert_on(conn));
        let restored = conn.batch_execute(busy_timeout_pragma).is_ok();
        (inserted, restored)
    }

    /// Whether the inbox holds the key already (a read).
    pub(crate) fn is_stored_on(&self, conn: &mut SqliteConnection) -> QueryResult<bool> {
        let found = InboxHas {
            source: &self.scope,
            provider: &self.provider,
            delivery_id: &self.delivery_id,
        }
        .get_result::<i64>(conn)
        .optional()?;
        Ok(found.is_some())
    }
}

/// The answer to an insert: stored, or found already stored.
pub(crate) fn received(inserted: bool) -> Received {
    if inserted {
        Received::Stored
    } else {
        Received::Duplicate
    }
}

/// A caller waiting for its row's commit.
struct Job {
    row: InboxInsert,
    answer: oneshot::Sender<Result<Received, SqliteError>>,
}

/// The handle the store keeps: dropping it (with the store) stops both threads after
/// the batch in progress.
#[derive(Debug)]
pub(crate) struct Writer {
    lookups: mpsc::Sender<Job>,
    config: GroupCommit,
    counts: Arc<Counts>,
}

/// Batches and rows committed, for [`GroupCommitStats`], and whether the writer has
/// a batch in hand.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    commits: CommitCounts,
    writing: AtomicBool,
    in_flight: ReceivesInFlight,
}

impl Counts {
    /// Counts a commit of `rows` deliveries (a batch, or a receive's own).
    fn committed(&self, rows: usize) {
        self.commits.committed(rows);
    }
}

impl Writer {
    /// Starts the lookup and writer threads for the database at `path`.
    ///
    /// # Errors
    /// A thread could not be started.
    pub(crate) fn start(
        path: PathBuf,
        options: SqliteOptions,
        config: GroupCommit,
    ) -> Result<Self, SqliteError> {
        let depth = config.queue_depth.max(1);
        let (lookups, lookup_queue) = mpsc::channel(depth);
        let (writes, write_queue) = mpsc::channel(WRITE_QUEUE_BATCHES);
        let counts = Arc::new(Counts::default());
        let writer_counts = Arc::clone(&counts);
        let lookup_counts = Arc::clone(&counts);
        let (writer_path, writer_options) = (path.clone(), options.clone());
        std::thread::Builder::new()
            .name("hookbox-sqlite-writer".into())
            .spawn(move || {
                run_writes(
                    &writer_path,
                    &writer_options,
                    config,
                    write_queue,
                    &writer_counts,
                );
            })
            .map_err(|_| SqliteError::Config("could not start the inbox writer thread"))?;
        std::thread::Builder::new()
            .name("hookbox-sqlite-lookup".into())
            .spawn(move || {
                run_lookups(
                    &path,
                    &options,
                    config,
                    lookup_queue,
                    &writes,
                    &lookup_counts,
                );
            })
            .map_err(|_| SqliteError::Config("could not start the inbox lookup thread"))?;
        Ok(Self {
            lookups,
            config,
            counts,
        })
    }

    /// Returns what the writer committed so far.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        self.counts.commits.stats()
    }

    /// Counts a receive in flight until the returned guard is dropped. Alone, the
    /// threads are idle, and the caller's own statement, as per-request commit
    /// writes it, saves two thread hand-offs.
    pub(crate) fn enter(&self) -> InFlight<'_> {
        self.counts.in_flight.enter()
    }

    /// Counts a lone receive's own insert, which stored its row, as a batch of one.
    pub(crate) fn committed_alone(&self) {
        self.counts.committed(1);
    }

    /// Queues `row` and waits for the read that finds it stored or the commit that
    /// holds it.
    ///
    /// # Errors
    /// [`SqliteError::Overloaded`] when the queue stayed full for the configured
    /// timeout; the batch's error when its transaction failed.
    pub(crate) async fn write(&self, row: InboxInsert) -> Result<Received, SqliteError> {
        let (answer, answered) = oneshot::channel();
        let job = Job { row, answer };
        match tokio::time::timeout(self.config.queue_timeout, self.lookups.send(job)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(STOPPED),
            Err(_) => return Err(SqliteError::Overloaded),
        }
        answered.await.unwrap_or(Err(STOPPED))
    }
}

/// Waits for the first job, then takes whatever else is queued, up to the batch cap.
fn next_batch(queue: &mut mpsc::Receiver<Job>, config: GroupCommit) -> Option<Vec<Job>> {
    let first = queue.blocking_recv()?;
    let cap = config.max_batch.max(1);
    let mut batch = Vec::with_capacity(cap.min(64));
    batch.push(first);
    while batch.len() < cap {
        match queue.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// The lookup thread: answers stored keys from a read and passes the rest on, until
/// the store is dropped (which drops `writes`, and so stops the writer).
///
/// The read only saves the write lock's queue: when it fails, or the connection
/// cannot be opened, the job goes on to the writer, whose insert decides.
///
/// A delivery alone in the queue while the writer is idle (low load) is written here,
/// in autocommit, as the writer would write a batch of one: handing it over would
/// cost a thread wake-up and gain nothing. Nothing can reach the writer meanwhile,
/// since only this thread feeds it.
fn run_lookups(
    path: &Path,
    options: &SqliteOptions,
    config: GroupCommit,
    mut queue: mpsc::Receiver<Job>,
    writes: &mpsc::Sender<Vec<Job>>,
    counts: &Counts,
) {
    let mut conn: Option<SqliteConnection> = None;
    while let Some(batch) = next_batch(&mut queue, config) {
        if conn.is_none() {
            conn = open_without_busy_handler(path, options).ok();
        }
        let mut fresh = Vec::with_capacity(batch.len());
        for job in batch {
            let stored = match conn.as_mut().map(|conn| job.row.is_stored_on(conn)) {
                Some(Ok(stored)) => stored,
                Some(Err(_)) => {
                    // reopened for the next batch; this one goes to the writer
                    conn = None;
                    false
                }
                None => false,
            };
            if stored {
                let _ = job.answer.send(Ok(Received::Duplicate));
            } else {
                fresh.push(job);
            }
        }
        let writer_idle =
            !counts.writing.load(Ordering::Acquire) && writes.capacity() == writes.max_capacity();
        if let (1, true, Some(open)) = (fresh.len(), writer_idle, conn.as_mut()) {
            if let Some(job) = fresh.pop() {
                write_alone(open, job, counts, Instant::now() + options.busy_timeout);
            }
        } else if !fresh.is_empty() {
            // one message: the writer sees the lookup's batch whole
            if let Err(mpsc::error::SendError(jobs)) = writes.blocking_send(fresh) {
                for job in jobs {
                    let _ = job.answer.send(Err(STOPPED));
                }
            }
        }
    }
}

/// The writer thread: a connection of its own, a batch per commit, until the
/// lookup thread stops.
fn run_writes(
    path: &Path,
    options: &SqliteOptions,
    config: GroupCommit,
    mut queue: mpsc::Receiver<Vec<Job>>,
    counts: &Counts,
) {
    let mut conn: Option<SqliteConnection> = None;
    let cap = config.max_batch.max(1);
    let mut pending: Vec<Job> = Vec::new();
    loop {
        // what is queued, in batches of at most `max_batch`
        if pending.is_empty() {
            counts.writing.store(false, Ordering::Release);
            let Some(first) = queue.blocking_recv() else {
                return; // the lookup thread stopped
            };
            counts.writing.store(true, Ordering::Release);
            pending = first;
            while pending.len() < cap {
                match queue.try_recv() {
                    Ok(more) => pending.extend(more),
                    Err(_) => break,
                }
            }
        }
        let rest = if pending.len() > cap {
            pending.split_off(cap)
        } else {
            Vec::new()
        };
        let batch = std::mem::replace(&mut pending, rest);
        if conn.is_none() {
            match open_without_busy_handler(path, options) {
                Ok(opened) => conn = Some(opened),
                Err(err) => {
                    let text = err.to_string();
                    for job in batch {
                        let _ = job
                            .answer
                            .send(Err(SqliteError::WriterUnavailable(text.clone())));
                    }
                    continue;
                }
            }
        }
        let Some(open) = conn.as_mut() else { continue };
        let lock_deadline = Instant::now() + options.busy_timeout;
        if !write_batch(open, batch, counts, lock_deadline) {
            // a connection in an unknown state is closed, never reused
            conn = None;
        }
    }
}

/// Opens a stage's connection (the lookup's or the writer's): the store's `PRAGMA`s,
/// then no busy handler (a stage waits for the lock itself, see
/// [`retry_while_locked`]).
fn open_without_busy_handler(
    path: &Path,
    options: &SqliteOptions,
) -> Result<SqliteConnection, SqliteError> {
    let mut conn = crate::connect::connect(path, options)?;
    conn.batch_execute("PRAGMA busy_timeout = 0")?;
    Ok(conn)
}

/// Runs `attempt` until it does not fail on the write lock, or `deadline` passes;
/// sleeps 20 µs after the first refusal, doubling up to [`MAX_LOCK_PAUSE`].
fn retry_while_locked<T>(
    deadline: Instant,
    mut attempt: impl FnMut() -> QueryResult<T>,
) -> QueryResult<T> {
    let mut pause = Duration::from_micros(20);
    loop {
        match attempt() {
            Err(err) if is_locked(&err) && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_LOCK_PAUSE);
            }
            result => return result,
        }
    }
}

/// Writes one batch and answers every caller; returns `false` when the connection
/// should be reopened.
fn write_batch(
    conn: &mut SqliteConnection,
    mut batch: Vec<Job>,
    counts: &Counts,
    lock_deadline: Instant,
) -> bool {
    let started = Instant::now();
    if batch.len() == 1 {
        if let Some(job) = batch.pop() {
            write_alone(conn, job, counts, lock_deadline);
        }
        return true;
    }
    if let Err(err) = retry_while_locked(lock_deadline, || conn.batch_execute("BEGIN IMMEDIATE")) {
        fail_all(
            batch.into_iter().map(|job| job.answer),
            SqliteError::from(err),
        );
        return true;
    }
    // every row in the one transaction; a row that fails (SQLite undoes the failed
    // statement, but some errors end the whole transaction) sends the batch to the
    // careful path
    let mut inserted = Vec::with_capacity(batch.len());
    for job in &batch {
        match job.row.insert_on(conn) {
            Ok(row_inserted) => inserted.push(row_inserted),
            Err(_) => {
                let _ = conn.batch_execute("ROLLBACK");
                return write_rows_apart(conn, batch, counts, lock_deadline, started);
            }
        }
    }
    let outcomes = batch
        .into_iter()
        .zip(inserted)
        .map(|(job, inserted)| (job, Ok(received(inserted))))
        .collect();
    commit(conn, outcomes, counts, lock_deadline, started)
}

/// Writes a delivery alone in the queue (low load): one statement in autocommit,
/// exactly the per-request path, without a transaction around it (a failed
/// autocommit statement leaves nothing open, so the connection stays usable).
fn write_alone(conn: &mut SqliteConnection, job: Job, counts: &Counts, lock_deadline: Instant) {
    let outcome = retry_while_locked(lock_deadline, || job.row.insert_on(conn));
    if outcome.is_ok() {
        counts.committed(1);
    }
    let _ = job
        .answer
        .send(outcome.map(received).map_err(SqliteError::from));
}

/// Writes a batch that held a failing row again, each row in a savepoint: the
/// failing row fails its caller, the others commit.
fn write_rows_apart(
    conn: &mut SqliteConnection,
    batch: Vec<Job>,
    counts: &Counts,
    lock_deadline: Instant,
    started: Instant,
) -> bool {
    if let Err(err) = retry_while_locked(lock_deadline, || conn.batch_execute("BEGIN IMMEDIATE")) {
        fail_all(
            batch.into_iter().map(|job| job.answer),
            SqliteError::from(err),
        );
        return false;
    }
    let mut outcomes: Vec<(Job, Result<Received, SqliteError>)> = Vec::with_capacity(batch.len());
    for job in batch {
        match insert_in_savepoint(conn, &job.row) {
            Ok(outcome) => outcomes.push((job, outcome)),
            Err(broken) => {
                // the transaction itself failed: nothing of the batch is stored
                let _ = conn.batch_execute("ROLLBACK");
                let waiting = outcomes.into_iter().map(|(waiting, _)| waiting.answer);
                fail_all(waiting.chain([job.answer]), broken);
                return false;
            }
        }
    }
    commit(conn, outcomes, counts, lock_deadline, started)
}

/// Commits the open transaction and answers every caller: their outcomes when the
/// commit returned, the commit's error when it failed (nothing of the batch stored).
fn commit(
    conn: &mut SqliteConnection,
    outcomes: Vec<(Job, Result<Received, SqliteError>)>,
    counts: &Counts,
    lock_deadline: Instant,
    started: Instant,
) -> bool {
    match retry_while_locked(lock_deadline, || conn.batch_execute("COMMIT")) {
        Ok(()) => {
            let size = outcomes.len();
            counts.committed(size);
            tracing::debug!(
                batch = size,
                commit_us = started.elapsed().as_micros() as u64,
                "inbox group commit"
            );
            for (job, outcome) in outcomes {
                let _ = job.answer.send(outcome);
            }
            true
        }
        Err(err) => {
            let _ = conn.batch_execute("ROLLBACK");
            let waiting = outcomes.into_iter().map(|(job, _)| job.answer);
            fail_all(waiting, SqliteError::from(err));
            false
        }
    }
}

/// Answers every caller of a failed batch: the last gets `err` itself, the others
/// a copy with its text and classification (a batch of one keeps the exact error).
fn fail_all(
    answers: impl Iterator<Item = oneshot::Sender<Result<Received, SqliteError>>>,
    err: SqliteError,
) {
    let mut answers = answers.peekable();
    while let Some(answer) = answers.next() {
        if answers.peek().is_some() {
            let _ = answer.send(Err(err.for_batch()));
        } else {
            let _ = answer.send(Err(err));
            return;
        }
    }
}

/// Inserts one row in a savepoint. The outer error means the transaction is gone;
/// the inner one is this row's own failure, already rolled back to the savepoint.
fn insert_in_savepoint(
    conn: &mut SqliteConnection,
    row: &InboxInsert,
) -> Result<Result<Received, SqliteError>, SqliteError> {
    conn.batch_execute("SAVEPOINT hookbox_row")?;
    match row.insert_on(conn) {
        Ok(inserted) => {
            conn.batch_execute("RELEASE hookbox_row")?;
            Ok(Ok(received(inserted)))
        }
        Err(err) => {
            conn.batch_execute("ROLLBACK TO hookbox_row")?;
            conn.batch_execute("RELEASE hookbox_row")?;
            Ok(Err(SqliteError::from(err)))
        }
    }
}
