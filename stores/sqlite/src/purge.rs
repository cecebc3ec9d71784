//! Retention: [`Purge`] for [`SqliteStore`] (expired keys, processed inbox rows
//! and sent outbox messages), the outbox's own share of it, and the batched
//! `DELETE` loop both run on.
//!
//! Each purge goes provider by provider: every retention rule at its own keep, then
//! every provider without a rule at [`DEFAULT_KEEP`](hookbox_core::DEFAULT_KEEP)
//! ([`RetentionPolicy::cutoffs`]). The store's [`Purge::purge`] (also the inbox's
//! [`InboxAdmin::purge`](hookbox_core::InboxAdmin::purge)) and the outbox's
//! [`OutboxAdmin::purge`](hookbox_core::OutboxAdmin::purge) both start here, on a
//! connection they check out.

use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl as _;
use hookbox_core::spi::Cutoffs;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{BoxFuture, Purge, Purged, RetentionPolicy};

use crate::connect::Conn;
use crate::error::SqliteError;
use crate::rows::micros;
use crate::store::SqliteStore;

/// Deletes expired keys, processed inbox rows and sent outbox messages, provider by
/// provider, in batches of the retention's batch size, each statement its own
/// short transaction; unprocessed rows, dead letters and unsent messages stay.
impl Purge for SqliteStore {
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, SqliteError>> {
        Box::pin(async move {
            let mut conn = self.connection().await?;
            let policy = &self.inner.options.retention;
            let cutoffs = policy.cutoffs(now);
            let batch = i64::from(policy.batch());
            let conn: &mut Conn = &mut conn;
            Ok(Purged {
                keys: by_provider(conn, &cutoffs, KEYS, batch).await?,
                inbox_rows: by_provider(conn, &cutoffs, ROWS, batch).await?,
                outbox_messages: by_provider(conn, &cutoffs, OUTBOX, batch).await?,
            })
        })
    }
}

/// Deletes sent messages past their provider's retention in `policy`, provider by
/// provider and then every provider without a rule at
/// [`DEFAULT_KEEP`](hookbox_core::DEFAULT_KEEP), in batches (as the store's purge
/// does keys and inbox rows); returns how many. Pending messages and dead letters
/// stay.
pub(crate) async fn purge_sent(
    conn: &mut Conn,
    policy: &RetentionPolicy,
    now: OffsetDateTime,
) -> Result<u64, SqliteError> {
    let batch = i64::from(policy.batch());
    by_provider(conn, &policy.cutoffs(now), OUTBOX, batch).await
}

/// Deletes up to a batch of one provider's expired keys. Binds: provider, cutoff,
/// batch size.
const PURGE_KEYS: &str = "DELETE FROM hookbox_processed_keys \
     WHERE (source, provider, delivery_id) IN \
     (SELECT source, provider, delivery_id FROM hookbox_processed_keys \
      WHERE provider = ? AND received_at < ? LIMIT ?)";
/// Deletes up to a batch of one provider's expired processed rows (never pending
/// rows or dead letters). Binds: provider, cutoff, batch size.
const PURGE_ROWS: &str = "DELETE FROM hookbox_inbox WHERE id IN \
     (SELECT id FROM hookbox_inbox WHERE provider = ? AND received_at < ? \
      AND processed_at IS NOT NULL AND dead_at IS NULL LIMIT ?)";
/// [`PURGE_KEYS`] for every provider without a rule of its own. Binds: a JSON
/// array of the providers that have one, cutoff, batch size.
const PURGE_KEYS_OF_OTHERS: &str = "DELETE FROM hookbox_processed_keys \
     WHERE (source, provider, delivery_id) IN \
     (SELECT source, provider, delivery_id FROM hookbox_processed_keys \
      WHERE provider NOT IN (SELECT value FROM json_each(?)) AND received_at < ? LIMIT ?)";
/// [`PURGE_ROWS`] for every provider without a rule of its own. Binds as
/// [`PURGE_KEYS_OF_OTHERS`].
const PURGE_ROWS_OF_OTHERS: &str = "DELETE FROM hookbox_inbox WHERE id IN \
     (SELECT id FROM hookbox_inbox \
      WHERE provider NOT IN (SELECT value FROM json_each(?)) AND received_at < ? \
      AND processed_at IS NOT NULL AND dead_at IS NULL LIMIT ?)";

/// Deletes up to a batch of one provider's sent messages past the cutoff (never
/// pending messages or dead letters). Binds: provider, cutoff, batch size.
const PURGE_OUTBOX: &str = "DELETE FROM hookbox_outbox WHERE seq IN \
     (SELECT seq FROM hookbox_outbox WHERE provider = ? AND sent_at < ? LIMIT ?)";
/// [`PURGE_OUTBOX`] for every provider without a rule of its own. Binds as
/// [`PURGE_KEYS_OF_OTHERS`].
const PURGE_OUTBOX_OF_OTHERS: &str = "DELETE FROM hookbox_outbox WHERE seq IN \
     (SELECT seq FROM hookbox_outbox \
      WHERE provider NOT IN (SELECT value FROM json_each(?)) AND sent_at < ? LIMIT ?)";

/// One table's purge statements: one provider's rows, and the rows of every
/// provider not in a JSON list.
type Statements = (&'static str, &'static str);
const KEYS: Statements = (PURGE_KEYS, PURGE_KEYS_OF_OTHERS);
const ROWS: Statements = (PURGE_ROWS, PURGE_ROWS_OF_OTHERS);
const OUTBOX: Statements = (PURGE_OUTBOX, PURGE_OUTBOX_OF_OTHERS);

/// Deletes one table's rows past `cutoffs`: each ruled provider's, then every other
/// provider's; returns how many.
async fn by_provider(
    conn: &mut Conn,
    cutoffs: &Cutoffs,
    (one, others): Statements,
    batch: i64,
) -> Result<u64, SqliteError> {
    let mut total = 0;
    for (provider, before) in &cutoffs.per_provider {
        total += delete_in_batches(conn, one, provider, micros(*before), batch).await?;
    }
    let ruled = serde_json::Value::from(cutoffs.ruled.clone()).to_string();
    total += delete_in_batches(conn, others, &ruled, micros(cutoffs.others), batch).await?;
    Ok(total)
}

/// Runs a `DELETE … LIMIT batch` statement until it deletes fewer than `batch`
/// rows; returns the total. Each statement is its own short transaction, so a large
/// purge never holds the write lock for long.
async fn delete_in_batches(
    conn: &mut Conn,
    sql: &'static str,
    selector: &str,
    before: i64,
    batch: i64,
) -> Result<u64, SqliteError> {
    let mut total = 0;
    loop {
        let deleted = diesel::sql_query(sql)
            .bind::<Text, _>(selector)
            .bind::<BigInt, _>(before)
            .bind::<BigInt, _>(batch)
            .execute(conn)
            .await?;
        total += deleted as u64;
        if (deleted as i64) < batch {
            return Ok(total);
        }
    }
}
