//! The inbox and its worker: `FOR UPDATE SKIP LOCKED`, a batch per transaction,
//! each handler in a savepoint.
//!
//! A batch locks up to N due rows with `FOR UPDATE SKIP LOCKED` (other workers skip
//! them, so batches run side by side), runs each handler inside its own savepoint,
//! records each failure, marks the processed rows in one statement and commits once.
//! A row runs in a batch on its first attempt only: a retry (a row whose handler
//! failed, panicked or timed out before) runs alone, so a poison row costs its
//! neighbours at most one redo.
//! A worker that dies mid-batch releases its rows with its connection: nothing of
//! the batch committed, and every row is due again at once. A handler that panics or
//! outruns its row timeout is abandoned: the batch rolls back (its connection is
//! closed, never reused), and a second transaction records the failure against that
//! row alone.

use std::time::Instant;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection as _};
use hookbox_core::bytes::Bytes;
use hookbox_core::{
    Abandoned, BatchLimits, BoxFuture, DedupeKey, ErasedHandler, GuardedRun, Inbox, InboxFilter,
    InboxStats, KeptHeaders, LegacyText, Received, RetryPolicy, RowFailure, RowOutcome, RowResult,
    StoredDelivery, VerifiedDelivery, error_chain, run_guarded,
};
use time::OffsetDateTime;

use crate::error::PgError;
use crate::schema::hookbox_inbox as inbox;
use crate::store::PgStore;
use crate::watch::{forget_failed_statement, statement_failed};
use crate::writer::{InboxInsert, received};

/// One inbox row as stored.
#[derive(Queryable, Selectable)]
#[diesel(table_name = inbox)]
#[diesel(check_for_backend(diesel::pg::Pg))]
struct InboxRow {
    id: i64,
    source: String,
    provider: String,
    delivery_id: String,
    tenant: Option<String>,
    event_type: Option<String>,
    body: Vec<u8>,
    headers: String,
    received_at: OffsetDateTime,
    processed_at: Option<OffsetDateTime>,
    attempts: i32,
    last_error: Option<String>,
    next_attempt_at: OffsetDateTime,
    dead_at: Option<OffsetDateTime>,
    correlation_id: Option<String>,
    signed_at: Option<OffsetDateTime>,
}

impl InboxRow {
    /// Returns the row's key (its stored scope as the source) and event type, for a
    /// worker's report on a row it could not read back.
    fn facts(&self) -> (DedupeKey, Option<String>) {
        let key = DedupeKey::new(
            self.source.clone(),
            self.provider.clone(),
            self.delivery_id.clone(),
        );
        (key, self.event_type.clone())
    }

    fn into_delivery(self) -> Result<StoredDelivery, PgError> {
        let corrupt = |source: Box<dyn std::error::Error + Send + Sync>| PgError::Corrupt {
            id: self.id,
            source,
        };
        // rows written before the core's codec kept values as (lossy) UTF-8 text
        let headers = KeptHeaders::from_json(&self.headers, LegacyText::Utf8)
            .map_err(|err| corrupt(Box::new(err)))?;
        // `source` holds the scope: the source, or source/tenant
        let source = match &self.tenant {
            Some(tenant) => self
                .source
                .strip_suffix(tenant.as_str())
                .and_then(|s| s.strip_suffix('/'))
                .unwrap_or(&self.source),
            None => &self.source,
        };
        let mut key = DedupeKey::new(source, self.provider, self.delivery_id);
        if let Some(tenant) = self.tenant {
            key = key.with_tenant(tenant);
        }
        Ok(StoredDelivery {
            id: self.id,
            key,
            event_type: self.event_type,
            correlation_id: self.correlation_id,
            signed_at: self.signed_at,
            body: Bytes::from(self.body),
            headers,
            received_at: self.received_at,
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            last_error: self.last_error,
            next_attempt_at: self.next_attempt_at,
            processed_at: self.processed_at,
            dead_at: self.dead_at,
        })
    }
}

/// How a batch's transaction ended without committing.
enum BatchTxError {
    Db(diesel::result::Error),
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

impl PgStore {
    /// The batch transaction (see the module docs).
    async fn run_batch(
        conn: &mut AsyncPgConnection,
        handler: &ErasedHandler<'_, AsyncPgConnection>,
        limits: BatchLimits,
        retry: &RetryPolicy,
    ) -> Result<Batch, PgError> {
        let batch = conn
            .transaction(async |conn| -> Result<Vec<RowOutcome>, BatchTxError> {
                // rows locked by other workers are skipped, not waited for; a worker
                // that dies mid-transaction releases its rows with its connection
                let rows = inbox::table
                    .filter(inbox::processed_at.is_null())
                    .filter(inbox::dead_at.is_null())
                    .filter(inbox::next_attempt_at.le(diesel::dsl::now))
                    .order((inbox::next_attempt_at.asc(), inbox::id.asc()))
                    .limit(i64::from(limits.rows()))
                    .for_update()
                    .skip_locked()
                    .select(InboxRow::as_select())
                    .load(conn)
                    .await?;
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
                                PgError::StatementFailed.to_string()
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
                    end.push_str("; UPDATE hookbox_inbox SET processed_at = now() WHERE id IN (");
                    for (i, id) in processed.iter().enumerate() {
                        if i > 0 {
                            end.push_str(", ");
                        }
                        end.push_str(&id.to_string());
                    }
                    end.push(')');
                }
                conn.batch_execute(&end).await?;
                Ok(outcomes)
            })
            .await;
        match batch {
            Ok(outcomes) => Ok(Batch::Committed(outcomes)),
            Err(BatchTxError::Abandoned { row, reason }) => Ok(Batch::Abandoned { row, reason }),
            Err(BatchTxError::Db(err)) => Err(PgError::query(err)),
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
    ) -> Result<RowOutcome, PgError> {
        use diesel::sql_types::{BigInt, Integer, Nullable, Text};

        #[derive(QueryableByName)]
        struct Attempts {
            #[diesel(sql_type = Nullable<Integer>)]
            attempts: Option<i32>,
        }

        let attempts = row.attempts.saturating_add(1);
        let delay = retry.next_delay(attempts);
        let error = reason.to_string();
        let recorded = self
            .with_connection(async |conn| {
                diesel::sql_query(
                    "UPDATE hookbox_inbox SET attempts = attempts + 1, last_error = $2, \
                       next_attempt_at = now() + $3 * interval '1 microsecond', \
                       dead_at = CASE WHEN attempts + 1 >= $4 THEN now() END \
                     WHERE id = $1 AND processed_at IS NULL AND dead_at IS NULL \
                     RETURNING attempts",
                )
                .bind::<BigInt, _>(row.id)
                .bind::<Text, _>(&error)
                .bind::<BigInt, _>(i64::try_from(delay.as_micros()).unwrap_or(i64::MAX))
                .bind::<Integer, _>(i32::try_from(retry.max_attempts).unwrap_or(i32::MAX))
                .get_results::<Attempts>(conn)
                .await
                .map_err(PgError::query)
            })
            .await?;
        let Some(recorded) = recorded.into_iter().next().and_then(|r| r.attempts) else {
            // another worker settled the row meanwhile (applied it, or recorded the
            // failure that made it a dead letter): nothing changed here
            return Ok(RowOutcome::failed(
                row,
                RowFailure::not_recorded(attempts, retry, error),
            ));
        };
        let attempts = u32::try_from(recorded).unwrap_or(0);
        let next = OffsetDateTime::now_utc() + delay;
        Ok(RowOutcome::failed(
            row,
            RowFailure::new(attempts, retry, error, next),
        ))
    }
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
    conn: &mut AsyncPgConnection,
    handler: &ErasedHandler<'_, AsyncPgConnection>,
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

impl Inbox for PgStore {
    fn receive<'a>(
        &'a self,
        delivery: &'a VerifiedDelivery,
    ) -> BoxFuture<'a, Result<Received, PgError>> {
        let key = delivery.dedupe_key();
        let row = InboxInsert {
            source: key.scope(),
            provider: key.provider().to_string(),
            delivery_id: key.delivery_id().to_string(),
            tenant: key.tenant().map(str::to_string),
            event_type: delivery.event_type().map(str::to_string),
            correlation_id: delivery.correlation_id().map(str::to_string),
            signed_at: delivery.signed_at(),
            body: delivery.body().clone(),
            headers: delivery.headers().to_json(),
        };
        Box::pin(async move {
            let Some(writer) = &self.inner.writer else {
                // per-request: one autocommitted statement, durable (per
                // synchronous_commit) when it returns
                let inserted = self
                    .with_connection(async |conn| row.insert_on(conn).await)
                    .await?;
                return Ok(received(inserted));
            };
            // group commit: a copy already stored is answered by the lookup task's
            // read, the rest are written in batches (see `writer`)
            writer.write(row).await
        })
    }

    fn work_batch_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, AsyncPgConnection>,
        limits: BatchLimits,
    ) -> BoxFuture<'a, Result<Vec<RowOutcome>, PgError>> {
        let retry = self.inner.options.get_retry();
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let batch = conn
                .run(async |conn| Self::run_batch(conn, handler, limits, &retry).await)
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
        })
    }

    fn worker_concurrency(&self) -> u32 {
        self.inner.options.get_worker_concurrency()
    }

    fn get(&self, id: i64) -> BoxFuture<'_, Result<Option<StoredDelivery>, PgError>> {
        Box::pin(async move {
            let row = self
                .with_connection(async |conn| {
                    inbox::table
                        .find(id)
                        .select(InboxRow::as_select())
                        .first(conn)
                        .await
                        .optional()
                        .map_err(PgError::query)
                })
                .await?;
            row.map(InboxRow::into_delivery).transpose()
        })
    }

    fn list(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<StoredDelivery>, PgError>> {
        Box::pin(async move {
            let query = inbox::table.select(InboxRow::as_select()).into_boxed();
            let query = match filter {
                InboxFilter::Pending => query
                    .filter(inbox::processed_at.is_null())
                    .filter(inbox::dead_at.is_null())
                    .order((inbox::next_attempt_at.asc(), inbox::id.asc())),
                InboxFilter::Processed => query
                    .filter(inbox::processed_at.is_not_null())
                    .order((inbox::processed_at.desc(), inbox::id.desc())),
                InboxFilter::Dead => query
                    .filter(inbox::dead_at.is_not_null())
                    .order((inbox::dead_at.asc(), inbox::id.asc())),
                InboxFilter::All => query.order(inbox::id.desc()),
            };
            let rows = self
                .with_connection(async |conn| {
                    query
                        .limit(i64::from(limit))
                        .load::<InboxRow>(conn)
                        .await
                        .map_err(PgError::query)
                })
                .await?;
            rows.into_iter().map(InboxRow::into_delivery).collect()
        })
    }

    fn replay(&self, id: i64) -> BoxFuture<'_, Result<bool, PgError>> {
        Box::pin(self.with_connection(async move |conn| {
            let replayed = diesel::update(
                inbox::table
                    .find(id)
                    .filter(inbox::dead_at.is_not_null())
                    .filter(inbox::processed_at.is_null()),
            )
            .set(replayed())
            .execute(conn)
            .await
            .map_err(PgError::query)?;
            Ok(replayed == 1)
        }))
    }

    fn replay_all(&self) -> BoxFuture<'_, Result<u64, PgError>> {
        Box::pin(self.with_connection(async |conn| {
            let replayed = diesel::update(
                inbox::table
                    .filter(inbox::dead_at.is_not_null())
                    .filter(inbox::processed_at.is_null()),
            )
            .set(replayed())
            .execute(conn)
            .await
            .map_err(PgError::query)?;
            Ok(replayed as u64)
        }))
    }

    fn stats(&self) -> BoxFuture<'_, Result<InboxStats, PgError>> {
        Box::pin(self.with_connection(async |conn| {
            let row = diesel::sql_query(
                "SELECT \
                   count(*) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL) AS pending, \
                   count(*) FILTER (WHERE processed_at IS NOT NULL) AS processed, \
                   count(*) FILTER (WHERE dead_at IS NOT NULL) AS dead, \
                   min(received_at) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL) \
                     AS oldest_pending \
                 FROM hookbox_inbox",
            )
            .get_result::<StatsRow>(conn)
            .await
            .map_err(PgError::query)?;
            Ok(InboxStats {
                pending: row.pending.try_into().unwrap_or(0),
                processed: row.processed.try_into().unwrap_or(0),
                dead: row.dead.try_into().unwrap_or(0),
                oldest_pending: row.oldest_pending,
            })
        }))
    }
}

#[derive(QueryableByName)]
struct StatsRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pending: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    processed: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    dead: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>)]
    oldest_pending: Option<OffsetDateTime>,
}

/// A replayed dead letter: due now with its attempts reset. `last_error` is kept for
/// the record until the next failure replaces it.
#[allow(clippy::type_complexity)]
fn replayed() -> (
    diesel::dsl::Eq<inbox::attempts, i32>,
    diesel::dsl::Eq<inbox::dead_at, Option<OffsetDateTime>>,
    diesel::dsl::Eq<inbox::next_attempt_at, diesel::dsl::now>,
) {
    (
        inbox::attempts.eq(0),
        inbox::dead_at.eq(None::<OffsetDateTime>),
        inbox::next_attempt_at.eq(diesel::dsl::now),
    )
}

/// Records a handler failure on the locked row; the caller's transaction commits it.
async fn record_failure(
    conn: &mut AsyncPgConnection,
    id: i64,
    attempts: u32,
    message: &str,
    delay: std::time::Duration,
    dead: bool,
) -> Result<(), diesel::result::Error> {
    use diesel::sql_types::{BigInt, Bool, Integer, Text};
    diesel::sql_query(
        "UPDATE hookbox_inbox SET attempts = $2, last_error = $3, \
           next_attempt_at = now() + $4 * interval '1 microsecond', \
           dead_at = CASE WHEN $5 THEN now() END \
         WHERE id = $1",
    )
    .bind::<BigInt, _>(id)
    .bind::<Integer, _>(i32::try_from(attempts).unwrap_or(i32::MAX))
    .bind::<Text, _>(message)
    .bind::<BigInt, _>(i64::try_from(delay.as_micros()).unwrap_or(i64::MAX))
    .bind::<Bool, _>(dead)
    .execute(conn)
    .await?;
    Ok(())
}
