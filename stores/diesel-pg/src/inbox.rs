//! The inbox and its worker: `FOR UPDATE SKIP LOCKED`, the handler in a savepoint.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use hookbox_core::bytes::Bytes;
use hookbox_core::{
    BoxFuture, DedupeKey, ErasedHandler, HandlerError, Inbox, InboxFilter, InboxStats, KeptHeaders,
    LegacyText, Received, StoredDelivery, VerifiedDelivery, Worked, error_chain,
};
use time::OffsetDateTime;

use crate::error::{PgError, TxError};
use crate::schema::hookbox_inbox as inbox;
use crate::store::PgStore;
use crate::watch::statement_failed;
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

/// What happened to the row a worker took, decided inside its transaction.
enum Outcome {
    Processed,
    Failed { attempts: u32, dead: bool },
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

    fn work_one_erased<'a>(
        &'a self,
        handler: &'a ErasedHandler<'a, AsyncPgConnection>,
    ) -> BoxFuture<'a, Result<Worked, PgError>> {
        let retry = self.inner.options.get_retry();
        Box::pin(self.with_connection(async move |conn| {
            let worked = conn
                .transaction(async move |conn| -> Result<Worked, TxError<PgError>> {
                    // rows locked by other workers are skipped, not waited for; a
                    // worker that dies mid-transaction releases its row with its
                    // connection
                    let row = inbox::table
                        .filter(inbox::processed_at.is_null())
                        .filter(inbox::dead_at.is_null())
                        .filter(inbox::next_attempt_at.le(diesel::dsl::now))
                        .order((inbox::next_attempt_at.asc(), inbox::id.asc()))
                        .limit(1)
                        .for_update()
                        .skip_locked()
                        .select(InboxRow::as_select())
                        .first(conn)
                        .await
                        .optional()?;
                    let Some(row) = row else {
                        return Ok(Worked::Idle);
                    };
                    let (id, attempts) = (row.id, row.attempts);
                    let failure = match row.into_delivery() {
                        // the handler runs in a savepoint: its writes roll back on
                        // failure while the row stays locked for the bookkeeping
                        Ok(stored) => conn
                            .transaction(async |conn| -> Result<(), TxError<HandlerError>> {
                                let delivery = stored.delivery();
                                handler(conn, &delivery).await.map_err(TxError::User)?;
                                if statement_failed(conn) {
                                    // releasing the savepoint would fail and stop the
                                    // worker; fail the row instead, visibly
                                    return Err(TxError::StatementFailed);
                                }
                                Ok(())
                            })
                            .await
                            .map_err(|err| match err {
                                // the whole cause chain: what an operator reads
                                TxError::User(err) => Ok(format!("{err:#}")),
                                TxError::StatementFailed => {
                                    Ok(PgError::StatementFailed.to_string())
                                }
                                TxError::Db(err) => Err(err),
                            })
                            .err(),
                        // an unreadable row fails like a handler would, so it ends as
                        // a dead letter instead of blocking the rows behind it
                        Err(err) => Some(Ok(error_chain(&err))),
                    };
                    let outcome = match failure {
                        None => {
                            diesel::update(inbox::table.find(id))
                                .set(inbox::processed_at.eq(diesel::dsl::now))
                                .execute(conn)
                                .await?;
                            Outcome::Processed
                        }
                        Some(Err(db)) => return Err(TxError::Db(db)),
                        Some(Ok(message)) => {
                            let attempts = u32::try_from(attempts).unwrap_or(0).saturating_add(1);
                            let dead = retry.is_dead(attempts);
                            let delay = retry.next_delay(attempts);
                            record_failure(conn, id, attempts, &message, delay, dead).await?;
                            Outcome::Failed { attempts, dead }
                        }
                    };
                    Ok(match outcome {
                        Outcome::Processed => Worked::Processed { id },
                        Outcome::Failed { attempts, dead } => Worked::Failed { id, attempts, dead },
                    })
                })
                .await;
            worked.map_err(|err| match err {
                TxError::Db(err) => PgError::query(err),
                TxError::StatementFailed => PgError::StatementFailed,
                TxError::User(err) => err,
            })
        }))
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
