//! Claims, version guards and retention: [`IdempotencyStore`] and [`VersionGuard`]
//! for [`PgStore`].

use diesel::prelude::*;
// `filter` on an upsert: the `WHERE` of `ON CONFLICT DO UPDATE`
use diesel::query_dsl::methods::FilterDsl as _;
use diesel::upsert::excluded;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use hookbox_core::{
    Advance, BoxFuture, Claim, DEFAULT_KEEP, DedupeKey, ErasedSideEffect, IdempotencyStore,
    ProcessError, Purged, RetentionPolicy, Store, TimestampAdvance, VersionGuard,
};
use time::OffsetDateTime;

use crate::error::{PgError, TxError};
use crate::schema::{hookbox_processed_keys, hookbox_version_times, hookbox_versions};
use crate::store::PgStore;
use crate::watch::statement_failed;

/// Inserts the key; `true` when it was new. A copy of the key that another
/// transaction inserted and has not committed yet makes this wait (up to
/// `lock_timeout`), then report a duplicate if that transaction committed.
async fn insert_key(
    conn: &mut AsyncPgConnection,
    key: &DedupeKey,
) -> Result<bool, diesel::result::Error> {
    let inserted = diesel::insert_into(hookbox_processed_keys::table)
        .values((
            hookbox_processed_keys::source.eq(key.scope()),
            hookbox_processed_keys::provider.eq(key.provider()),
            hookbox_processed_keys::delivery_id.eq(key.delivery_id()),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    Ok(inserted == 1)
}

impl Store for PgStore {
    type Conn = AsyncPgConnection;
    type Error = PgError;

    fn retention(&self) -> &RetentionPolicy {
        self.inner.options.get_retention()
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), PgError>> {
        Box::pin(self.with_connection(async |conn| {
            // the inbox's first page: the server answers and the schema is there
            diesel::sql_query("SELECT 1 FROM hookbox_inbox LIMIT 1")
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(())
        }))
    }
}

impl IdempotencyStore for PgStore {
    fn claim<'a>(
        &'a self,
        conn: &'a mut AsyncPgConnection,
        key: &'a DedupeKey,
    ) -> BoxFuture<'a, Result<Claim, PgError>> {
        Box::pin(async move {
            match insert_key(conn, key).await {
                Ok(true) => Ok(Claim::New),
                Ok(false) => Ok(Claim::Duplicate),
                Err(err) => Err(PgError::query(err)),
            }
        })
    }

    fn process_once_erased<'a>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: ErasedSideEffect<'a, AsyncPgConnection>,
    ) -> BoxFuture<'a, Result<Claim, ProcessError<PgError>>> {
        Box::pin(self.with_connection(async move |conn| {
            let outcome = conn
                .transaction(async move |conn| {
                    if !insert_key(conn, key).await? {
                        // nothing written: the empty transaction commits
                        return Ok(Claim::Duplicate);
                    }
                    side_effect(conn, &&()).await.map_err(TxError::User)?;
                    if statement_failed(conn) {
                        return Err(TxError::StatementFailed);
                    }
                    Ok(Claim::New)
                })
                .await;
            outcome.map_err(|err| match err {
                TxError::Db(err) => ProcessError::Store(PgError::query(err)),
                TxError::StatementFailed => ProcessError::Store(PgError::StatementFailed),
                TxError::User(err) => ProcessError::SideEffect(err),
            })
        }))
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, PgError>> {
        Box::pin(self.with_connection(async move |conn| purge(self, conn, now).await))
    }
}

/// Deletes expired keys, processed inbox rows and sent outbox messages, provider by
/// provider, in batches of `policy.batch()` rows per statement, each its own
/// transaction, so a purge never holds many locks for long.
async fn purge(
    store: &PgStore,
    conn: &mut AsyncPgConnection,
    now: OffsetDateTime,
) -> Result<Purged, PgError> {
    // `$1` is an array of providers: those a rule names, or (`<> ALL`) those without
    // a rule of their own
    const KEYS: &str = "DELETE FROM hookbox_processed_keys WHERE ctid = ANY(ARRAY( \
         SELECT ctid FROM hookbox_processed_keys \
         WHERE provider = ANY($1) AND received_at < $2 LIMIT $3))";
    const KEYS_OTHERS: &str = "DELETE FROM hookbox_processed_keys WHERE ctid = ANY(ARRAY( \
         SELECT ctid FROM hookbox_processed_keys \
         WHERE provider <> ALL($1) AND received_at < $2 LIMIT $3))";
    // processed rows only: pending rows and dead letters are never purged
    const INBOX: &str = "DELETE FROM hookbox_inbox WHERE id = ANY(ARRAY( \
         SELECT id FROM hookbox_inbox \
         WHERE processed_at IS NOT NULL AND dead_at IS NULL \
         AND provider = ANY($1) AND received_at < $2 LIMIT $3))";
    const INBOX_OTHERS: &str = "DELETE FROM hookbox_inbox WHERE id = ANY(ARRAY( \
         SELECT id FROM hookbox_inbox \
         WHERE processed_at IS NOT NULL AND dead_at IS NULL \
         AND provider <> ALL($1) AND received_at < $2 LIMIT $3))";

    let policy = store.inner.options.get_retention();
    let batch = i64::from(policy.batch());
    let mut purged = Purged::default();
    let cutoff = |keep: std::time::Duration| {
        now - time::Duration::try_from(keep).unwrap_or(time::Duration::MAX)
    };
    for (provider, keep) in policy.rules() {
        let one = [provider.to_string()];
        purged.keys += delete_in_batches(conn, KEYS, &one, cutoff(keep), batch).await?;
        purged.inbox_rows += delete_in_batches(conn, INBOX, &one, cutoff(keep), batch).await?;
    }
    let ruled: Vec<String> = policy.rules().map(|(name, _)| name.to_string()).collect();
    let before = cutoff(DEFAULT_KEEP);
    purged.keys += delete_in_batches(conn, KEYS_OTHERS, &ruled, before, batch).await?;
    purged.inbox_rows += delete_in_batches(conn, INBOX_OTHERS, &ruled, before, batch).await?;
    purged.outbox_messages = crate::outbox::purge_sent(store, conn, now).await?;
    Ok(purged)
}

/// Runs a `DELETE … LIMIT batch` statement until it deletes fewer than `batch`
/// rows; returns the total. `sql` binds the providers, the cutoff and the batch size.
pub(crate) async fn delete_in_batches(
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

impl VersionGuard for PgStore {
    fn advance<'a>(
        &'a self,
        conn: &'a mut AsyncPgConnection,
        object: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Advance, PgError>> {
        Box::pin(async move {
            // one statement: a concurrent advance of the same object waits on the row
            // lock and then compares against the committed version
            let stored = diesel::insert_into(hookbox_versions::table)
                .values((
                    hookbox_versions::object.eq(object),
                    hookbox_versions::version.eq(version),
                ))
                .on_conflict(hookbox_versions::object)
                .do_update()
                .set(hookbox_versions::version.eq(excluded(hookbox_versions::version)))
                .filter(hookbox_versions::version.lt(excluded(hookbox_versions::version)))
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(if stored == 1 {
                Advance::Applied
            } else {
                Advance::Stale
            })
        })
    }

    fn advance_at<'a>(
        &'a self,
        conn: &'a mut AsyncPgConnection,
        object: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<TimestampAdvance, PgError>> {
        Box::pin(async move {
            let micros = unix_micros(at);
            let stored = diesel::insert_into(hookbox_version_times::table)
                .values((
                    hookbox_version_times::object.eq(object),
                    hookbox_version_times::at_micros.eq(micros),
                ))
                .on_conflict(hookbox_version_times::object)
                .do_update()
                .set(
                    hookbox_version_times::at_micros.eq(excluded(hookbox_version_times::at_micros)),
                )
                .filter(
                    hookbox_version_times::at_micros.lt(excluded(hookbox_version_times::at_micros)),
                )
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            if stored == 1 {
                return Ok(TimestampAdvance::Applied);
            }
            // not stored: the row exists and is locked by the upsert above until this
            // transaction ends, so this read sees the value it was compared with
            let current: i64 = hookbox_version_times::table
                .find(object)
                .select(hookbox_version_times::at_micros)
                .first(conn)
                .await
                .map_err(PgError::query)?;
            Ok(if current == micros {
                TimestampAdvance::Unknown
            } else {
                TimestampAdvance::Stale
            })
        })
    }
}

/// Unix microseconds, saturating far outside any real timestamp.
fn unix_micros(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1000).unwrap_or(if at.unix_timestamp() < 0 {
        i64::MIN
    } else {
        i64::MAX
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_compare_by_microsecond() {
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(unix_micros(at), 1_700_000_000_000_000);
        assert_eq!(
            unix_micros(at + time::Duration::microseconds(1)),
            1_700_000_000_000_001
        );
    }
}
