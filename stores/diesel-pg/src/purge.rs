//! Retention: [`Purge`] for [`PgStore`] (expired keys, processed inbox rows and
//! sent outbox messages), the outbox's own share of it, and the batched deletes
//! both run on, rule by rule and then the rest
//! ([`RetentionPolicy::cutoffs`]). The store's [`Purge::purge`] (also the inbox's
//! [`InboxAdmin::purge`](hookbox_core::InboxAdmin::purge)) and the outbox's
//! [`OutboxAdmin::purge`](hookbox_core::OutboxAdmin::purge) (in `outbox::admin`)
//! both start here.

use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::spi::Cutoffs;
use hookbox_core::{BoxFuture, Purge, Purged, RetentionPolicy};
use time::OffsetDateTime;

use crate::error::PgError;
use crate::store::PgStore;

/// One table's purge statements: `$1` is an array of providers, those a rule names
/// (`= ANY`), or those without a rule of their own (`<> ALL`); `$2` the cutoff, `$3`
/// the batch size.
type Statements = (&'static str, &'static str);

const PURGE_KEYS: Statements = (
    "DELETE FROM hookbox_processed_keys WHERE ctid = ANY(ARRAY( \
     SELECT ctid FROM hookbox_processed_keys \
     WHERE provider = ANY($1) AND received_at < $2 LIMIT $3))",
    "DELETE FROM hookbox_processed_keys WHERE ctid = ANY(ARRAY( \
     SELECT ctid FROM hookbox_processed_keys \
     WHERE provider <> ALL($1) AND received_at < $2 LIMIT $3))",
);
// processed rows only: pending rows and dead letters are never purged
const PURGE_ROWS: Statements = (
    "DELETE FROM hookbox_inbox WHERE id = ANY(ARRAY( \
     SELECT id FROM hookbox_inbox \
     WHERE processed_at IS NOT NULL AND dead_at IS NULL \
     AND provider = ANY($1) AND received_at < $2 LIMIT $3))",
    "DELETE FROM hookbox_inbox WHERE id = ANY(ARRAY( \
     SELECT id FROM hookbox_inbox \
     WHERE processed_at IS NOT NULL AND dead_at IS NULL \
     AND provider <> ALL($1) AND received_at < $2 LIMIT $3))",
);
// sent messages only: pending ones and dead letters stay
const PURGE_OUTBOX: Statements = (
    "DELETE FROM hookbox_outbox WHERE seq = ANY(ARRAY( \
     SELECT seq FROM hookbox_outbox \
     WHERE sent_at IS NOT NULL AND provider = ANY($1) AND sent_at < $2 LIMIT $3))",
    "DELETE FROM hookbox_outbox WHERE seq = ANY(ARRAY( \
     SELECT seq FROM hookbox_outbox \
     WHERE sent_at IS NOT NULL AND provider <> ALL($1) AND sent_at < $2 LIMIT $3))",
);

/// Deletes expired keys, processed inbox rows and sent outbox messages, provider by
/// provider, on one pooled connection; unprocessed rows, dead letters and unsent
/// messages stay.
impl Purge for PgStore {
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, PgError>> {
        Box::pin(self.with_connection(async move |conn| {
            purge_all(conn, self.inner.options.retention(), now).await
        }))
    }
}

/// Deletes expired keys, processed inbox rows and sent outbox messages, provider by
/// provider, in batches of `policy.batch()` rows per statement, each its own
/// transaction, so a purge never holds many locks for long.
async fn purge_all(
    conn: &mut AsyncPgConnection,
    policy: &RetentionPolicy,
    now: OffsetDateTime,
) -> Result<Purged, PgError> {
    let cutoffs = policy.cutoffs(now);
    let batch = i64::from(policy.batch());
    Ok(Purged {
        keys: by_provider(conn, &cutoffs, PURGE_KEYS, batch).await?,
        inbox_rows: by_provider(conn, &cutoffs, PURGE_ROWS, batch).await?,
        outbox_messages: by_provider(conn, &cutoffs, PURGE_OUTBOX, batch).await?,
    })
}

/// Deletes sent messages past their provider's retention, with the same rules and
/// batches as the keys and inbox rows ([`Purge::purge`] deletes them too).
pub(crate) async fn purge_sent(
    conn: &mut AsyncPgConnection,
    policy: &RetentionPolicy,
    now: OffsetDateTime,
) -> Result<u64, PgError> {
    let batch = i64::from(policy.batch());
    by_provider(conn, &policy.cutoffs(now), PURGE_OUTBOX, batch).await
}

/// Deletes one table's rows past `cutoffs`: each ruled provider's, then every other
/// provider's; returns how many.
async fn by_provider(
    conn: &mut AsyncPgConnection,
    cutoffs: &Cutoffs,
    (one, others): Statements,
    batch: i64,
) -> Result<u64, PgError> {
    let mut total = 0;
    for (provider, before) in &cutoffs.per_provider {
        total +=
            delete_in_batches(conn, one, std::slice::from_ref(provider), *before, batch).await?;
    }
    total += delete_in_batches(conn, others, &cutoffs.ruled, cutoffs.others, batch).await?;
    Ok(total)
}

/// Runs a `DELETE … LIMIT batch` statement until it deletes fewer than `batch`
/// rows; returns the total. `sql` binds the providers, the cutoff and the batch size.
async fn delete_in_batches(
    conn: &mut AsyncPgConnection,
    sql: &'static str,
    providers: &[String],
    before: OffsetDateTime,
    batch: i64,
) -> Result<u64, PgError> {
    use diesel::sql_types::{Array, BigInt, Text, Timestamptz};
    let mut total = 0;
    loop {
        let deleted = diesel::sql_query(sql)
            .bind::<Array<Text>, _>(providers)
            .bind::<Timestamptz, _>(before)
            .bind::<BigInt, _>(batch)
            .execute(conn)
            .await
            .map_err(PgError::query)?;
        total += deleted as u64;
        if (deleted as i64) < batch {
            return Ok(total);
        }
    }
}
