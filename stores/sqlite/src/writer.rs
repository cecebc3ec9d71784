//! Group commit for the inbox: one writer thread per store takes every
//! `Inbox::receive` insert that is waiting, writes them in one transaction, commits
//! once, and only then answers each caller.
//!
//! SQLite has one write lock per file and, at `synchronous = FULL`, one `fsync` per
//! commit: a commit per delivery caps the edge at the disk's fsync rate whatever the
//! concurrency. Here a batch is whatever queued while the previous commit ran (no
//! timer): one delivery at low load, hundreds under load.
//!
//! Guarantees, per delivery, the same as a commit of its own:
//! - a caller is answered `Stored` or `Duplicate` only after the `COMMIT` that holds
//!   its row returned;
//! - each row is inserted in a savepoint, so a row that fails (too large, a
//!   constraint) fails its caller only and the rest of the batch commits;
//! - if `BEGIN` or `COMMIT` fails, every caller of the batch gets the error and
//!   nothing of the batch is stored (the sender retries each).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use diesel::RunQueryDsl as _;
use diesel::connection::SimpleConnection as _;
use diesel::sql_types::{BigInt, Binary, Nullable, Text};
use diesel::sqlite::SqliteConnection;
use hookbox_core::bytes::Bytes;
use hookbox_core::{GroupCommit, GroupCommitStats, Received};
use tokio::sync::{mpsc, oneshot};

use crate::error::SqliteError;
use crate::options::SqliteOptions;
use crate::sql;

/// One inbox row to insert, owned so it can cross to the writer thread.
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
    /// Runs the insert on `conn`; `true` when a row was inserted.
    pub(crate) fn insert_on(&self, conn: &mut SqliteConnection) -> diesel::QueryResult<bool> {
        let inserted = diesel::sql_query(sql::RECEIVE)
            .bind::<Text, _>(&self.scope)
            .bind::<Text, _>(&self.provider)
            .bind::<Text, _>(&self.delivery_id)
            .bind::<Nullable<Text>, _>(self.tenant.as_deref())
            .bind::<Nullable<Text>, _>(self.event_type.as_deref())
            .bind::<Nullable<Text>, _>(self.correlation_id.as_deref())
            .bind::<Nullable<BigInt>, _>(self.signed_at)
            .bind::<Binary, _>(self.body.as_ref())
            .bind::<Text, _>(&self.headers)
            .bind::<BigInt, _>(self.now)
            .bind::<BigInt, _>(self.now)
            .execute(conn)?;
        Ok(inserted == 1)
    }
}

/// Whether the inbox holds the key already: a read, which under WAL never waits for
/// the writer.
///
/// # Errors
/// The query failed.
pub(crate) fn already_stored(
    conn: &mut SqliteConnection,
    scope: &str,
    provider: &str,
    delivery_id: &str,
) -> Result<bool, SqliteError> {
    #[derive(diesel::QueryableByName)]
    struct Found {
        #[diesel(sql_type = BigInt)]
        #[allow(dead_code)]
        found: i64,
    }
    use diesel::OptionalExtension as _;
    let found = diesel::sql_query(sql::INBOX_HAS)
        .bind::<Text, _>(scope)
        .bind::<Text, _>(provider)
        .bind::<Text, _>(delivery_id)
        .get_result::<Found>(conn)
        .optional()?;
    Ok(found.is_some())
}

/// A caller waiting for its row's commit.
struct Job {
    row: InboxInsert,
    answer: oneshot::Sender<Result<Received, SqliteError>>,
}

/// The handle the store keeps: dropping it (with the store) stops the thread after
/// the batch in progress.
#[derive(Debug)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Job>,
    config: GroupCommit,
    counts: Arc<Counts>,
}

/// Batches and rows committed, for [`GroupCommitStats`].
#[derive(Debug, Default)]
pub(crate) struct Counts {
    batches: AtomicU64,
    rows: AtomicU64,
}

impl Counts {
    fn committed(&self, rows: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
    }
}

impl Writer {
    /// Starts the writer thread for the database at `path`.
    ///
    /// # Errors
    /// The thread could not be started.
    pub(crate) fn start(
        path: std::path::PathBuf,
        options: SqliteOptions,
        config: GroupCommit,
    ) -> Result<Self, SqliteError> {
        let (jobs, queue) = mpsc::channel(config.queue_depth.max(1));
        let counts = Arc::new(Counts::default());
        let thread_counts = Arc::clone(&counts);
        std::thread::Builder::new()
            .name("hookbox-sqlite-writer".into())
            .spawn(move || run(&path, &options, config, queue, &thread_counts))
            .map_err(|_| SqliteError::Config("could not start the inbox writer thread"))?;
        Ok(Self {
            jobs,
            config,
            counts,
        })
    }

    /// Returns what the writer committed so far.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            batches: self.counts.batches.load(Ordering::Relaxed),
            rows: self.counts.rows.load(Ordering::Relaxed),
        }
    }

    /// Queues `row` and waits for the commit that holds it.
    ///
    /// # Errors
    /// [`SqliteError::Overloaded`] when the queue stayed full for the configured
    /// timeout; the batch's error when its transaction failed.
    pub(crate) async fn write(&self, row: InboxInsert) -> Result<Received, SqliteError> {
        let (answer, answered) = oneshot::channel();
        let job = Job { row, answer };
        match tokio::time::timeout(self.config.queue_timeout, self.jobs.send(job)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(SqliteError::Config("the inbox writer thread stopped")),
            Err(_) => return Err(SqliteError::Overloaded),
        }
        answered
            .await
            .unwrap_or(Err(SqliteError::Config("the inbox writer thread stopped")))
    }
}

/// The writer thread: a connection of its own, a batch per commit, until the store
/// is dropped.
fn run(
    path: &std::path::Path,
    options: &SqliteOptions,
    config: GroupCommit,
    mut queue: mpsc::Receiver<Job>,
    counts: &Counts,
) {
    let mut conn: Option<SqliteConnection> = None;
    while let Some(first) = queue.blocking_recv() {
        let mut batch = Vec::with_capacity(config.max_batch.min(64));
        batch.push(first);
        while batch.len() < config.max_batch.max(1) {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if conn.is_none() {
            match crate::connect::connect(path, options) {
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
        if !write_batch(open, batch, counts) {
            // a connection in an unknown state is closed, never reused
            conn = None;
        }
    }
}

/// Writes one batch and answers every caller; returns `false` when the connection
/// should be reopened.
fn write_batch(conn: &mut SqliteConnection, mut batch: Vec<Job>, counts: &Counts) -> bool {
    let started = Instant::now();
    let size = batch.len();
    if size == 1 {
        // alone in the queue (low load): one statement in autocommit, exactly the
        // per-request path, without a transaction or a savepoint around it
        let Some(job) = batch.pop() else { return true };
        let outcome = job.row.insert_on(conn).map(|inserted| {
            if inserted {
                Received::Stored
            } else {
                Received::Duplicate
            }
        });
        if outcome.is_ok() {
            counts.committed(1);
        }
        let _ = job.answer.send(outcome.map_err(SqliteError::from));
        return true;
    }
    if let Err(err) = conn.batch_execute("BEGIN IMMEDIATE") {
        fail_all(
            batch.into_iter().map(|job| job.answer),
            SqliteError::from(err),
        );
        return true;
    }
    // each row in a savepoint: a failing row fails its caller, not the batch
    let mut outcomes: Vec<(Job, Result<Received, SqliteError>)> = Vec::with_capacity(size);
    for job in batch {
        let outcome = insert_in_savepoint(conn, &job.row);
        match outcome {
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
    match conn.batch_execute("COMMIT") {
        Ok(()) => {
            counts.committed(size);
            tracing::debug!(
                batch = size,
                commit_us = started.elapsed().as_micros() as u64,
                "inbox group commit"
            );
            #[cfg(feature = "metrics")]
            metrics::histogram!("hookbox_inbox_batch_size").record(size as f64);
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
            Ok(Ok(if inserted {
                Received::Stored
            } else {
                Received::Duplicate
            }))
        }
        Err(err) => {
            conn.batch_execute("ROLLBACK TO hookbox_row")?;
            conn.batch_execute("RELEASE hookbox_row")?;
            Ok(Err(SqliteError::from(err)))
        }
    }
}
