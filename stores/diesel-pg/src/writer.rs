//! Group commit for the inbox: a lookup task and writer tasks between
//! `Inbox::receive` and the database, each taking every receive that is waiting
//! (no timer) and serving them with one statement.
//!
//! 1. **lookup**: one `SELECT` over the batch's keys (`unnest` of three arrays)
//!    answers each key already stored `Duplicate`: a read, no write, no queue for
//!    the writers. The rest go on to the writers as one batch. A delivery alone in
//!    the queue while the writers are idle goes straight on: their insert answers
//!    a stored key without writing, and the round trip is saved.
//! 2. **writers** ([`PgOptions::with_group_commit_writers`](crate::PgOptions::with_group_commit_writers)
//!    tasks, 4 by default, so the next batch is read while others are
//!    on the wire): one `INSERT … SELECT … FROM unnest(…) ON CONFLICT DO NOTHING
//!    RETURNING` per batch on one pooled connection. A batch reaches one writer
//!    whole: handing its deliveries over one by one let an idle writer take the
//!    first alone.
//!
//! A receive with no other in flight (low load) skips both stages and runs its
//! insert itself, as per-request commit does, so one sender is not slowed by two
//! hops between tasks; receives that arrive meanwhile queue and are batched.
//!
//! Both statements have one text whatever the batch size, so each is prepared once
//! per connection; a batch costs two round trips and one commit instead of two
//! round trips and a commit per delivery.
//!
//! Guarantees, per delivery, the same as a statement of its own:
//! - a caller is answered only after the statement that holds its row (or the one
//!   that found it stored) returned: one autocommitted statement, durable (per the
//!   server's `synchronous_commit`) when it returns;
//! - two copies of one key in a batch: one `Stored`, the other `Duplicate`;
//! - a row the database refuses fails the whole statement, so the batch is written
//!   again row by row: the refused row fails its caller only;
//! - a connection lost mid-batch fails every caller of the batch (5xx, the senders
//!   retry): the same answer a per-request insert gives when its connection drops.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use diesel::QueryResult;
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Bytea, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::bytes::Bytes;
use hookbox_core::spi::{CommitCounts, GroupCommit, ReceivesInFlight};
use hookbox_core::{GroupCommitStats, Received, StoreError as _};
use time::OffsetDateTime;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::PgError;
use crate::pool::{ConnPool, PooledConnection};

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

    /// Inserts this row alone; `true` when it was new.
    pub(crate) async fn insert_on(&self, conn: &mut AsyncPgConnection) -> Result<bool, PgError> {
        let stored = InsertRows::new(std::iter::once(self))
            .get_results::<(String, String, String)>(conn)
            .await
            .map_err(PgError::query)?;
        Ok(!stored.is_empty())
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

/// `INSERT … SELECT * FROM unnest(<one array per column>) ON CONFLICT DO NOTHING
/// RETURNING` the keys inserted: one text for any number of rows, so it is prepared
/// once per connection.
struct InsertRows<'a> {
    sources: Vec<&'a str>,
    providers: Vec<&'a str>,
    delivery_ids: Vec<&'a str>,
    tenants: Vec<Option<&'a str>>,
    event_types: Vec<Option<&'a str>>,
    correlation_ids: Vec<Option<&'a str>>,
    signed_at: Vec<Option<OffsetDateTime>>,
    bodies: Vec<&'a [u8]>,
    headers: Vec<&'a str>,
}

impl<'a> InsertRows<'a> {
    fn new(rows: impl ExactSizeIterator<Item = &'a InboxInsert>) -> Self {
        let n = rows.len();
        let mut columns = Self {
            sources: Vec::with_capacity(n),
            providers: Vec::with_capacity(n),
            delivery_ids: Vec::with_capacity(n),
            tenants: Vec::with_capacity(n),
            event_types: Vec::with_capacity(n),
            correlation_ids: Vec::with_capacity(n),
            signed_at: Vec::with_capacity(n),
            bodies: Vec::with_capacity(n),
            headers: Vec::with_capacity(n),
        };
        for row in rows {
            columns.sources.push(&row.source);
            columns.providers.push(&row.provider);
            columns.delivery_ids.push(&row.delivery_id);
            columns.tenants.push(row.tenant.as_deref());
            columns.event_types.push(row.event_type.as_deref());
            columns.correlation_ids.push(row.correlation_id.as_deref());
            columns.signed_at.push(row.signed_at);
            columns.bodies.push(&row.body);
            columns.headers.push(&row.headers);
        }
        columns
    }
}

impl QueryId for InsertRows<'_> {
    type QueryId = InsertRows<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for InsertRows<'_> {
    type SqlType = (Text, Text, Text);
}

impl QueryFragment<Pg> for InsertRows<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO hookbox_inbox (source, provider, delivery_id, tenant, event_type, \
             correlation_id, signed_at, body, headers) SELECT * FROM unnest(",
        );
        out.push_bind_param::<Array<Text>, _>(&self.sources)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.providers)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.delivery_ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Text>>, _>(&self.tenants)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Text>>, _>(&self.event_types)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Text>>, _>(&self.correlation_ids)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Timestamptz>>, _>(&self.signed_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Bytea>, _>(&self.bodies)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.headers)?;
        out.push_sql(") ON CONFLICT DO NOTHING RETURNING source, provider, delivery_id");
        Ok(())
    }
}

/// The positions (1-based) of the keys the inbox holds already, among the arrays'
/// keys: one text for any number of keys, prepared once per connection.
///
/// A correlated subquery with `LIMIT 1` rather than `EXISTS`: the planner may turn
/// `EXISTS` into a hash semi-join that reads the whole inbox when its statistics
/// are stale (a table filling fast, before autovacuum's analyze), while this form
/// is always one probe of the unique index per key.
struct StoredKeys<'a> {
    sources: Vec<&'a str>,
    providers: Vec<&'a str>,
    delivery_ids: Vec<&'a str>,
}

impl QueryId for StoredKeys<'_> {
    type QueryId = StoredKeys<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for StoredKeys<'_> {
    type SqlType = BigInt;
}

impl QueryFragment<Pg> for StoredKeys<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("SELECT k.n FROM unnest(");
        out.push_bind_param::<Array<Text>, _>(&self.sources)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.providers)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.delivery_ids)?;
        out.push_sql(
            ") WITH ORDINALITY AS k (source, provider, delivery_id, n) WHERE \
             (SELECT true FROM hookbox_inbox i WHERE i.source = k.source \
             AND i.provider = k.provider AND i.delivery_id = k.delivery_id LIMIT 1)",
        );
        Ok(())
    }
}

/// A caller waiting for its row's statement.
struct Job {
    row: InboxInsert,
    answer: oneshot::Sender<Result<Received, PgError>>,
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
    /// Batches the writers have in hand.
    writing: AtomicUsize,
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
        tokio::spawn(run_lookups(
            pool.clone(),
            lookup_queue,
            config,
            writes,
            Arc::clone(&counts),
        ));
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
    /// [`PgError::Overloaded`] when the queue stayed full for the configured timeout;
    /// the batch's error when its statement failed.
    pub(crate) async fn write(&self, row: InboxInsert) -> Result<Received, PgError> {
        let in_flight = self.counts.in_flight.enter();
        if in_flight.alone() {
            // nothing else anywhere in the stages (low load): the caller's own
            // statement, as per-request commit, without two hops between tasks; a
            // receive that arrives meanwhile queues and is batched
            return self.write_alone(&row).await;
        }
        let (answer, answered) = oneshot::channel();
        let job = Job { row, answer };
        match tokio::time::timeout(self.config.queue_timeout, self.lookups.send(job)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return Err(PgError::Overloaded),
        }
        answered.await.unwrap_or(Err(PgError::Overloaded))
    }

    /// Writes a lone row on a pooled connection: one autocommitted statement.
    async fn write_alone(&self, row: &InboxInsert) -> Result<Received, PgError> {
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
    counts: Arc<Counts>,
) {
    while let Some(batch) = next_batch(&mut queue, config).await {
        // alone in the queue while the writers are idle (low load): the writers'
        // insert is the read, since `ON CONFLICT DO NOTHING` on a stored key writes
        // nothing (no transaction id, no WAL to flush), and a round trip is saved;
        // under load every key is read first, so a duplicate never waits for a
        // writer
        let writers_idle = AtomicUsize::load(&counts.writing, Ordering::Acquire) == 0
            && writes.capacity() == writes.max_capacity();
        let lookup = if batch.len() == 1 && writers_idle {
            Ok(Vec::new())
        } else {
            stored_positions(&pool, &batch).await
        };
        let stored = match lookup {
            Ok(stored) => stored,
            Err(err) => {
                let error = hookbox_core::error_chain(&err);
                tracing::debug!(%error, "inbox lookup failed; the writers decide");
                Vec::new()
            }
        };
        let mut stored = stored.into_iter().peekable();
        let mut fresh = Vec::with_capacity(batch.len());
        for (position, job) in (1_i64..).zip(batch) {
            if stored.next_if_eq(&position).is_some() {
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
                let _ = job.answer.send(Err(PgError::Overloaded));
            }
        }
    }
}

/// The 1-based positions in `batch` whose keys the inbox holds, in order.
async fn stored_positions(pool: &ConnPool, batch: &[Job]) -> Result<Vec<i64>, PgError> {
    let query = StoredKeys {
        sources: batch.iter().map(|job| job.row.source.as_str()).collect(),
        providers: batch.iter().map(|job| job.row.provider.as_str()).collect(),
        delivery_ids: batch
            .iter()
            .map(|job| job.row.delivery_id.as_str())
            .collect(),
    };
    let mut conn = PooledConnection::get(pool).await?;
    let mut positions = conn
        .run(async |conn| query.get_results::<i64>(conn).await.map_err(PgError::query))
        .await?;
    positions.sort_unstable();
    Ok(positions)
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
        counts.writing.fetch_add(1, Ordering::AcqRel);
        write_batch(&pool, batch, &counts).await;
        counts.writing.fetch_sub(1, Ordering::AcqRel);
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
    let query = InsertRows::new(batch.iter().map(|job| &job.row));
    let inserted = conn
        .run(
            async |conn| -> Result<Vec<(String, String, String)>, PgError> {
                query.get_results(conn).await.map_err(PgError::query)
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
            // each returned key answers its first caller Stored; later copies in
            // the batch, and keys not returned, were already there
            let mut new: HashMap<(&str, &str, &str), bool> = stored
                .iter()
                .map(|(source, provider, id)| {
                    ((source.as_str(), provider.as_str(), id.as_str()), true)
                })
                .collect();
            let firsts: Vec<bool> = batch
                .iter()
                .map(|job| {
                    new.get_mut(&job.row.key())
                        .is_some_and(|fresh| std::mem::replace(fresh, false))
                })
                .collect();
            for (job, first) in batch.into_iter().zip(firsts) {
                let _ = job.answer.send(Ok(received(first)));
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
                    .map(received);
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
