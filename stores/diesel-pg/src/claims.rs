//! Claims and version guards: [`IdempotencyStore`] and [`VersionGuard`] for
//! [`PgStore`], with [`Store`] (the connection and error types, the readiness
//! check, the retention policy). Retention's deletes,
//! [`Purge`](hookbox_core::Purge), are in [`purge`](crate::purge).

use diesel::prelude::*;
// `filter` on an upsert: the `WHERE` of `ON CONFLICT DO UPDATE`
use diesel::query_dsl::methods::FilterDsl as _;
use diesel::upsert::excluded;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use hookbox_core::spi::ErasedSideEffect;
use hookbox_core::{
    Advance, BoxFuture, Claim, DedupeKey, IdempotencyStore, ProcessError, RetentionPolicy, Store,
    TimestampAdvance, VersionGuard,
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
        self.inner.options.retention()
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
