//! Group commit for the inbox: writer tasks take every `Inbox::receive` insert that
//! is waiting and write them with one multi-row statement on one pooled connection,
//! so a batch costs one round trip and one commit instead of one each per delivery.
//!
//! Guarantees, per delivery, the same as a statement of its own:
//! - a caller is answered only after the statement that holds its row returned (one
//!   autocommitted `INSERT … ON CONFLICT DO NOTHING RETURNING`: durable, per the
//!   server's `synchronous_commit`, when it returns);
//! - two copies of one key in a batch: one `Stored`, the other `Duplicate`;
//! - a row the database refuses fails the whole statement, so the batch is written
//!   again row by row: the refused row fails its caller only;
//! - a connection lost mid-batch fails every caller of the batch (5xx, the senders
//!   retry): the same answer a per-request insert gives when its connection drops.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::{GroupCommit, GroupCommitStats, Received, StoreError as _};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::PgError;
use crate::pool::{ConnPool, PooledConnection};
use crate::schema::hookbox_inbox as inbox;

/// One inbox row, owned so it can wait in the writer's queue.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = inbox)]
pub(crate) struct InboxInsert {
    pub(crate) source: String,
    pub(crate) provider: String,
    pub(crate) delivery_id: String,
    pub(crate) tenant: Option<String>,
    pub(crate) event_type: Option<String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) signed_at: Option<time::OffsetDateTime>,
    pub(crate) body: Vec<u8>,
    pub(crate) headers: String,
}

impl InboxInsert {
    fn key(&self) -> (&str, &str, &str) {
        (&self.source, &self.provider, &self.delivery_id)
    }

    /// Inserts this row alone; `true` when it was new.
    pub(crate) async fn insert_on(&self, conn: &mut AsyncPgConnection) -> Result<bool, PgError> {
        let inserted = diesel::insert_into(inbox::table)
            .values(self)
            .on_conflict_do_nothing()
            .execute(conn)
            .await
            .map_err(PgError::query)?;
        Ok(inserted == 1)
    }
}

/// A caller waiting for its row's statement.
struct Job {
    row: InboxInsert,
    answer: oneshot::Sender<Result<Received, PgError>>,
}

/// The handle the store keeps; the writer tasks stop when it is dropped.
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

/// Writer tasks per store: a batch in flight on one connection while the next one
/// gathers.
const WRITERS: usize = 2;

impl Writer {
    /// Starts the writer tasks on the current tokio runtime.
    pub(crate) fn start(pool: ConnPool, config: GroupCommit) -> Self {
        let (jobs, queue) = mpsc::channel(config.queue_depth.max(1));
        let queue = Arc::new(Mutex::new(queue));
        let counts = Arc::new(Counts::default());
        for _ in 0..WRITERS {
            tokio::spawn(run(
                pool.clone(),
                Arc::clone(&queue),
                config,
                Arc::clone(&counts),
            ));
        }
        Self {
            jobs,
            config,
            counts,
        }
    }

    /// Returns what the writer committed so far.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            batches: AtomicU64::load(&self.counts.batches, Ordering::Relaxed),
            rows: AtomicU64::load(&self.counts.rows, Ordering::Relaxed),
        }
    }

    /// Queues `row` and waits for the statement that holds it.
    ///
    /// # Errors
    /// [`PgError::Overloaded`] when the queue stayed full for the configured timeout;
    /// the batch's error when its statement failed.
    pub(crate) async fn write(&self, row: InboxInsert) -> Result<Received, PgError> {
        let (answer, answered) = oneshot::channel();
        let job = Job { row, answer };
        match tokio::time::timeout(self.config.queue_timeout, self.jobs.send(job)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return Err(PgError::Overloaded),
        }
        answered.await.unwrap_or(Err(PgError::Overloaded))
    }
}

/// One writer: gathers what is queued (no timer), writes it, answers, repeats.
async fn run(
    pool: ConnPool,
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    config: GroupCommit,
    counts: Arc<Counts>,
) {
    loop {
        let batch = {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else {
                return; // the store was dropped
            };
            let mut batch = vec![first];
            while batch.len() < config.max_batch.max(1) {
                match queue.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        write_batch(&pool, batch, &counts).await;
    }
}

/// Writes one batch and answers every caller.
async fn write_batch(pool: &ConnPool, batch: Vec<Job>, counts: &Counts) {
    let started = Instant::now();
    let size = batch.len();
    let mut conn = match PooledConnection::get(pool).await {
        Ok(conn) => conn,
        Err(err) => return fail_all(batch, err),
    };
    let rows: Vec<InboxInsert> = batch.iter().map(|job| job.row.clone()).collect();
    let inserted = conn
        .run(
            async |conn| -> Result<Vec<(String, String, String)>, PgError> {
                diesel::insert_into(inbox::table)
                    .values(&rows)
                    .on_conflict_do_nothing()
                    .returning((inbox::source, inbox::provider, inbox::delivery_id))
                    .get_results(conn)
                    .await
                    .map_err(PgError::query)
            },
        )
        .await;
    match inserted {
        Ok(stored) => {
            counts.committed(size);
            tracing::debug!(
                batch = size,
                commit_us = started.elapsed().as_micros() as u64,
                "inbox group commit"
            );
            #[cfg(feature = "metrics")]
            metrics::histogram!("hookbox_inbox_batch_size").record(size as f64);
            // each returned key answers its first caller Stored; later copies in
            // the batch, and keys not returned, were already there
            let mut new: HashMap<(String, String, String), bool> =
                stored.into_iter().map(|key| (key, true)).collect();
            for job in batch {
                let (source, provider, id) = job.row.key();
                let first = new
                    .get_mut(&(source.to_string(), provider.to_string(), id.to_string()))
                    .map(|fresh| std::mem::replace(fresh, false))
                    .unwrap_or(false);
                let answer = if first {
                    Received::Stored
                } else {
                    Received::Duplicate
                };
                let _ = job.answer.send(Ok(answer));
            }
        }
        Err(err) if err.is_transient() => fail_all(batch, err),
        Err(_) => {
            // a row the database refused: each row on its own, so the refusal
            // fails its caller only
            for job in batch {
                let outcome = conn
                    .run(async |conn| job.row.insert_on(conn).await)
                    .await
                    .map(|new| {
                        if new {
                            Received::Stored
                        } else {
                            Received::Duplicate
                        }
                    });
                let _ = job.answer.send(outcome);
            }
        }
    }
}

/// Answers every caller of a failed batch: the last gets `err` itself, the others
/// a copy with its text and classification.
fn fail_all(batch: Vec<Job>, err: PgError) {
    let mut jobs = batch.into_iter().peekable();
    while let Some(job) = jobs.next() {
        if jobs.peek().is_some() {
            let _ = job.answer.send(Err(err.for_batch()));
        } else {
            let _ = job.answer.send(Err(err));
            return;
        }
    }
}
