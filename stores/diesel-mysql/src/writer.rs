//! Group commit for the inbox: a lookup task and writer tasks between
//! `Inbox::receive` and the database, each taking every receive that is waiting
//! (no timer) and serving them with one statement.
//!
//! 1. **lookup**: one `SELECT` over the batch's keys answers each key already stored
//!    `Duplicate`: a plain read (InnoDB's consistent read, no lock), no write, no
//!    queue for the writers. The rest go on to the writers as one batch. Unlike on
//!    PostgreSQL the read is never skipped: an `INSERT` of a stored key takes a
//!    shared lock on it for its duplicate check, which would wait for a worker
//!    holding that row in its batch.
//! 2. **writers** ([`MysqlOptions::with_group_commit_writers`](crate::MysqlOptions::with_group_commit_writers)
//!    tasks, 4 by default, so the next batch is read while others are on the
//!    wire): one multi-row `INSERT … VALUES (…), (…)` per batch on one pooled
//!    connection, autocommitted. Copies of one key in a batch are written once.
//!    A batch reaches one writer whole.
//!
//! A receive with no other in flight (low load) skips both stages and runs its read
//! and insert itself, as per-request commit does, so one sender is not slowed by two
//! hops between tasks; receives that arrive meanwhile queue and are batched.
//!
//! A plain `INSERT` either adds every row or fails as a whole, so it says which rows
//! are new without `RETURNING` (MySQL has none), `INSERT IGNORE` (which turns every
//! error into a warning and stores coerced values) or an affected-row count (which
//! `CLIENT_FOUND_ROWS` makes ambiguous for `ON DUPLICATE KEY UPDATE`). A batch the
//! server refuses, a copy of a key that was stored since the lookup among them, is
//! written again row by row, each row's duplicate-key error answering `Duplicate`.
//!
//! Guarantees, per delivery, the same as a statement of its own:
//! - a caller is answered only after the statement that holds its row (or the read
//!   that found it stored) returned: one autocommitted statement, durable (per the
//!   server's `innodb_flush_log_at_trx_commit`) when it returns;
//! - two copies of one key in a batch: one `Stored`, the other `Duplicate`;
//! - a row the database refuses fails the whole statement, so the batch is written
//!   again row by row: the refused row fails its caller only;
//! - a connection lost mid-batch fails every caller of the batch (5xx, the senders
//!   retry): the same answer a per-request insert gives when its connection drops.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use diesel::QueryResult;
use diesel::mysql::Mysql;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{Blob, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use hookbox_core::bytes::Bytes;
use hookbox_core::spi::{CommitCounts, GroupCommit, ReceivesInFlight};
use hookbox_core::{GroupCommitStats, Received, StoreError as _};
use time::OffsetDateTime;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::MysqlError;
use crate::pool::{ConnPool, PooledConnection};
use crate::watch::insert_new;

/// The most body and header bytes one statement carries: a batch larger than this
/// is written in several statements, so none comes near the server's
/// `max_allowed_packet` (16 MiB on MariaDB, 64 MiB on MySQL 8.0 by default).
const STATEMENT_BYTES: usize = 4 << 20;

/// One inbox row, owned so it can wait in the queues.
#[derive(Debug, Clone)]
pub(crate) struct InboxInsert {
    pub(crate) source: String,
    pub(crate) provider: String,
    pub(crate) delivery_id: String,
    pub(crate) tenant: Option<String>,
    pub(crate) event_type: Option<String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) signed_at: Option<OffsetDateTime>,
    pub(crate) body: Bytes,
    pub(crate) headers: String,
}

impl InboxInsert {
    fn key(&self) -> (&str, &str, &str) {
        (&self.source, &self.provider, &self.delivery_id)
    }

    /// Reads whether the key is stored, and inserts the row if not; `true` when it
    /// was new. The read takes no lock, so a copy of a row a worker holds is
    /// answered at once; a copy inserted between the read and the insert makes the
    /// insert fail as a duplicate (after waiting for it to commit).
    pub(crate) async fn insert_on(
        &self,
        conn: &mut AsyncMysqlConnection,
    ) -> Result<bool, MysqlError> {
        let stored = StoredKeys::new(std::iter::once(self))
            .load::<(String, String, String)>(conn)
            .await
            .map_err(MysqlError::query)?;
        if !stored.is_empty() {
            return Ok(false);
        }
        self.insert_alone(conn).await
    }

    /// Inserts this row alone, without reading first; `true` when it was new.
    async fn insert_alone(&self, conn: &mut AsyncMysqlConnection) -> Result<bool, MysqlError> {
        insert_new(conn, async |conn| {
            InsertRows::new(std::iter::once(self)).execute(conn).await
        })
        .await
        .map_err(MysqlError::query)
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

/// `INSERT INTO hookbox_inbox (…) VALUES (…), (…)`: one text per number of rows.
/// The one-row text is prepared once per connection and kept; a text of more rows
/// is prepared for its batch and closed after it, so a connection never keeps one
/// statement per batch size (the server's `max_prepared_stmt_count`, 16382 by
/// default, counts the statements of every connection of every receiver).
struct InsertRows<'a> {
    rows: Vec<&'a InboxInsert>,
}

impl<'a> InsertRows<'a> {
    fn new(rows: impl Iterator<Item = &'a InboxInsert>) -> Self {
        Self {
            rows: rows.collect(),
        }
    }
}

impl QueryId for InsertRows<'_> {
    type QueryId = ();
    // the text depends on the number of rows: cached by its text, if at all
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl QueryFragment<Mysql> for InsertRows<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Mysql>) -> QueryResult<()> {
        if self.rows.len() > 1 {
            out.unsafe_to_cache_prepared();
        }
        out.push_sql(
            "INSERT INTO hookbox_inbox (source, provider, delivery_id, tenant, event_type, \
             correlation_id, signed_at, body, headers, received_at, next_attempt_at) VALUES ",
        );
        for (i, row) in self.rows.iter().enumerate() {
            out.push_sql(if i == 0 { "(" } else { ", (" });
            out.push_bind_param::<Text, _>(&row.source)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&row.provider)?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&row.delivery_id)?;
            out.push_sql(", ");
            out.push_bind_param::<Nullable<Text>, _>(&row.tenant)?;
            out.push_sql(", ");
            out.push_bind_param::<Nullable<Text>, _>(&row.event_type)?;
            out.push_sql(", ");
            out.push_bind_param::<Nullable<Text>, _>(&row.correlation_id)?;
            out.push_sql(", ");
            out.push_bind_param::<Nullable<Datetime>, _>(&row.signed_at)?;
            out.push_sql(", ");
            out.push_bind_param::<Blob, _>(row.body.as_ref())?;
            out.push_sql(", ");
            out.push_bind_param::<Text, _>(&row.headers)?;
            out.push_sql(", UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))");
        }
        Ok(())
    }
}

/// The keys among the given ones that the inbox holds: one probe of the unique key
/// per key (`(…) OR (…)`, which both servers' range optimizer turns into index
/// lookups), a consistent read that takes no lock. Prepared and kept for one key;
/// for more, prepared for the batch and closed after it (see [`InsertRows`]).
struct StoredKeys<'a> {
    keys: Vec<(&'a str, &'a str, &'a str)>,
}

impl<'a> StoredKeys<'a> {
    fn new(rows: impl Iterator<Item = &'a InboxInsert>) -> Self {
        Self {
            keys: rows.map(InboxInsert::key).collect(),
        }
    }
}

impl QueryId for StoredKeys<'_> {
    type QueryId = ();
    // the text depends on the number of keys: cached by its text, if at all
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for StoredKeys<'_> {
    type SqlType = (Text, Text, Text);
}

impl QueryFragment<Mysql> for StoredKeys<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Mysql>) -> QueryResult<()> {
        if self.keys.len() > 1 {
            out.unsafe_to_cache_prepared();
        }
        out.push_sql("SELECT source, provider, delivery_id FROM hookbox_inbox WHERE ");
        for (i, (source, provider, delivery_id)) in self.keys.iter().enumerate() {
            out.push_sql(if i == 0 {
                "(source = "
            } else {
                " OR (source = "
            });
            out.push_bind_param::<Text, _>(source)?;
            out.push_sql(" AND provider = ");
            out.push_bind_param::<Text, _>(provider)?;
            out.push_sql(" AND delivery_id = ");
            out.push_bind_param::<Text, _>(delivery_id)?;
            out.push_sql(")");
        }
        Ok(())
    }
}

/// A caller waiting for its row's statement.
struct Job {
    row: InboxInsert,
    answer: oneshot::Sender<Result<Received, MysqlError>>,
}

/// The handle the store keeps; the tasks stop when it is dropped.
pub(crate) struct Writer {
    lookups: mpsc::Sender<Job>,
    /// For a receive that is alone in flight, which skips the stages.
    pool: ConnPool,
    config: GroupCommit,
    counts: Arc<Counts>,
}

impl std::fmt::Debug for Writer {
    // the pool's connections are not `Debug`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("config", &self.config)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

/// Batches and rows committed, for [`GroupCommitStats`].
#[derive(Debug, Default)]
pub(crate) struct Counts {
    commits: CommitCounts,
    in_flight: ReceivesInFlight,
}

impl Counts {
    /// Counts a commit of `rows` deliveries (a batch, or a receive's own).
    fn committed(&self, rows: usize) {
        self.commits.committed(rows);
    }
}

impl Writer {
    /// Starts the lookup task and `writers` writer tasks on the current tokio
    /// runtime.
    pub(crate) fn start(pool: ConnPool, config: GroupCommit, writers: usize) -> Self {
        let writers = writers.max(1);
        let depth = config.queue_depth.max(1);
        let (lookups, lookup_queue) = mpsc::channel(depth);
        // the writers' queue holds a batch for each: the deliveries beyond wait in
        // the lookup's queue, which `queue_depth` bounds
        let (writes, write_queue) = mpsc::channel(writers);
        let write_queue = Arc::new(Mutex::new(write_queue));
        let counts = Arc::new(Counts::default());
        tokio::spawn(run_lookups(pool.clone(), lookup_queue, config, writes));
        for _ in 0..writers {
            tokio::spawn(run_writes(
                pool.clone(),
                Arc::clone(&write_queue),
                Arc::clone(&counts),
            ));
        }
        Self {
            lookups,
            pool,
            config,
            counts,
        }
    }

    /// Returns what the writers committed so far.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        self.counts.commits.stats()
    }

    /// Queues `row` and waits for the statement that finds it stored or holds it.
    ///
    /// # Errors
    /// [`MysqlError::Overloaded`] when the queue stayed full for the configured
    /// timeout; the batch's error when its statement failed.
    pub(crate) async fn write(&self, row: InboxInsert) -> Result<Received, MysqlError> {
        let in_flight = self.counts.in_flight.enter();
        if in_flight.alone() {
            // nothing else anywhere in the stages (low load): the caller's own
            // statements, as per-request commit, without two hops between tasks; a
            // receive that arrives meanwhile queues and is batched
            return self.write_alone(&row).await;
        }
        let (answer, answered) = oneshot::channel();
        let job = Job { row, answer };
        match tokio::time::timeout(self.config.queue_timeout, self.lookups.send(job)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return Err(MysqlError::Overloaded),
        }
        answered.await.unwrap_or(Err(MysqlError::Overloaded))
    }

    /// Writes a lone row on a pooled connection: a read and one autocommitted
    /// statement.
    async fn write_alone(&self, row: &InboxInsert) -> Result<Received, MysqlError> {
        let started = Instant::now();
        let mut conn = PooledConnection::get(&self.pool).await?;
        let inserted = conn.run(async |conn| row.insert_on(conn).await).await?;
        self.counts.committed(1);
        tracing::debug!(
            batch = 1,
            commit_us = started.elapsed().as_micros() as u64,
            "inbox group commit"
        );
        Ok(received(inserted))
    }
}

/// Waits for the first job, then takes whatever else is queued, up to the batch cap.
async fn next_batch(queue: &mut mpsc::Receiver<Job>, config: GroupCommit) -> Option<Vec<Job>> {
    let first = queue.recv().await?;
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

/// The lookup task: answers stored keys from one read per batch and passes the rest
/// on, until the store is dropped (which drops `writes`, and so stops the writers).
///
/// The read only spares the writers: when it fails, the batch goes on to them, and
/// their insert decides.
async fn run_lookups(
    pool: ConnPool,
    mut queue: mpsc::Receiver<Job>,
    config: GroupCommit,
    writes: mpsc::Sender<Vec<Job>>,
) {
    while let Some(batch) = next_batch(&mut queue, config).await {
        let stored = match stored_keys(&pool, &batch).await {
            Ok(stored) => stored,
            Err(err) => {
                let error = hookbox_core::error_chain(&err);
                tracing::debug!(%error, "inbox lookup failed; the writers decide");
                Vec::new()
            }
        };
        let stored: std::collections::HashSet<(&str, &str, &str)> = stored
            .iter()
            .map(|(source, provider, id)| (source.as_str(), provider.as_str(), id.as_str()))
            .collect();
        let mut fresh = Vec::with_capacity(batch.len());
        for job in batch {
            if stored.contains(&job.row.key()) {
                let _ = job.answer.send(Ok(Received::Duplicate));
            } else {
                fresh.push(job);
            }
        }
        // the rest go on whole, so one writer writes them in one statement
        if fresh.is_empty() {
            continue;
        }
        if let Err(mpsc::error::SendError(fresh)) = writes.send(fresh).await {
            for job in fresh {
                let _ = job.answer.send(Err(MysqlError::Overloaded));
            }
        }
    }
}

/// The keys of `batch` the inbox holds.
async fn stored_keys(
    pool: &ConnPool,
    batch: &[Job],
) -> Result<Vec<(String, String, String)>, MysqlError> {
    let query = StoredKeys::new(batch.iter().map(|job| &job.row));
    let mut conn = PooledConnection::get(pool).await?;
    conn.run(async |conn| query.load(conn).await.map_err(MysqlError::query))
        .await
}

/// One writer: takes the next batch the lookup passed on (at most `max_batch`
/// deliveries, gathered without a timer), writes it, answers, repeats.
async fn run_writes(
    pool: ConnPool,
    queue: Arc<Mutex<mpsc::Receiver<Vec<Job>>>>,
    counts: Arc<Counts>,
) {
    loop {
        let Some(batch) = queue.lock().await.recv().await else {
            return; // the store was dropped
        };
        write_batch(&pool, batch, &counts).await;
    }
}

/// Splits `rows` (indices into `batch`) into statements of at most
/// [`STATEMENT_BYTES`] of bodies and headers each (at least one row each).
fn statements(batch: &[Job], rows: &[usize]) -> Vec<Vec<usize>> {
    let mut statements = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for &i in rows {
        let size = batch[i].row.body.len() + batch[i].row.headers.len();
        if !current.is_empty() && bytes + size > STATEMENT_BYTES {
            statements.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(i);
    }
    if !current.is_empty() {
        statements.push(current);
    }
    statements
}

/// Writes one batch and answers every caller.
async fn write_batch(pool: &ConnPool, batch: Vec<Job>, counts: &Counts) {
    let started = Instant::now();
    let size = batch.len();
    let mut conn = match PooledConnection::get(pool).await {
        Ok(conn) => conn,
        Err(err) => return fail_all(batch.into_iter().map(|job| job.answer).collect(), err),
    };
    // the first copy of each key is written; the later ones are answered with it
    let mut firsts: HashMap<(&str, &str, &str), usize> = HashMap::with_capacity(size);
    let mut copy_of: Vec<Option<usize>> = Vec::with_capacity(size);
    let mut unique = Vec::with_capacity(size);
    for (i, job) in batch.iter().enumerate() {
        match firsts.get(&job.row.key()) {
            Some(&first) => copy_of.push(Some(first)),
            None => {
                firsts.insert(job.row.key(), i);
                copy_of.push(None);
                unique.push(i);
            }
        }
    }
    let mut outcomes: Vec<Option<Result<Received, MysqlError>>> = Vec::with_capacity(size);
    outcomes.resize_with(size, || None);
    for rows in statements(&batch, &unique) {
        let query = InsertRows::new(rows.iter().map(|&i| &batch[i].row));
        let written = conn
            .run(async |conn| query.execute(conn).await.map_err(MysqlError::query))
            .await;
        match written {
            Ok(_) => {
                counts.committed(rows.len());
                for &i in &rows {
                    outcomes[i] = Some(Ok(Received::Stored));
                }
            }
            Err(err) if err.is_transient() => {
                // the last caller gets the error itself, the others a copy with its
                // text and classification
                if let Some((&last, rest)) = rows.split_last() {
                    for &i in rest {
                        outcomes[i] = Some(Err(err.for_batch()));
                    }
                    outcomes[last] = Some(Err(err));
                }
            }
            Err(_) => {
                // a copy stored since the lookup, or a row the database refused:
                // each row on its own, so a duplicate answers `Duplicate` and a
                // refusal fails its caller only
                for &i in &rows {
                    let row = &batch[i].row;
                    let outcome = conn
                        .run(async |conn| row.insert_alone(conn).await)
                        .await
                        .map(received);
                    if matches!(outcome, Ok(Received::Stored)) {
                        counts.committed(1);
                    }
                    outcomes[i] = Some(outcome);
                }
            }
        }
    }
    tracing::debug!(
        batch = size,
        commit_us = started.elapsed().as_micros() as u64,
        "inbox group commit"
    );
    // a later copy of a key: `Duplicate` once its first copy's row is there, the
    // first copy's error otherwise (nothing of the key was stored)
    let copies: Vec<Option<Result<Received, MysqlError>>> = copy_of
        .iter()
        .map(|first| {
            first.map(|first| match &outcomes[first] {
                Some(Ok(_)) => Ok(Received::Duplicate),
                Some(Err(err)) => Err(err.for_batch()),
                None => Err(MysqlError::Overloaded),
            })
        })
        .collect();
    for ((job, outcome), copy) in batch.into_iter().zip(outcomes).zip(copies) {
        let answer = copy.or(outcome).unwrap_or(Err(MysqlError::Overloaded));
        let _ = job.answer.send(answer);
    }
}

/// Answers every caller of a failed batch: the last gets `err` itself, the others
/// a copy with its text and classification.
fn fail_all(answers: Vec<oneshot::Sender<Result<Received, MysqlError>>>, err: MysqlError) {
    let mut answers = answers.into_iter().peekable();
    while let Some(answer) = answers.next() {
        if answers.peek().is_some() {
            let _ = answer.send(Err(err.for_batch()));
        } else {
            let _ = answer.send(Err(err));
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, body: usize) -> Job {
        Job {
            row: InboxInsert {
                source: "s".into(),
                provider: "p".into(),
                delivery_id: id.into(),
                tenant: None,
                event_type: None,
                correlation_id: None,
                signed_at: None,
                body: Bytes::from(vec![b'x'; body]),
                headers: "[]".into(),
            },
            answer: oneshot::channel().0,
        }
    }

    #[test]
    fn a_large_batch_is_split_into_statements_of_bounded_size() {
        let half = STATEMENT_BYTES / 2;
        let batch = vec![
            job("a", 10),
            job("b", half),
            job("c", half),
            job("d", STATEMENT_BYTES * 2),
            job("e", 10),
        ];
        let rows: Vec<usize> = (0..batch.len()).collect();
        // a row larger than the bound goes alone; the others fill statements in order
        assert_eq!(
            statements(&batch, &rows),
            vec![vec![0, 1], vec![2], vec![3], vec![4]]
        );
        assert_eq!(statements(&batch, &[]), Vec::<Vec<usize>>::new());
    }
}
