//! Claims and version guards: [`IdempotencyStore`] and [`VersionGuard`] for
//! [`MysqlStore`], with [`Store`] (the connection and error types, the readiness
//! check, the retention policy). Retention's deletes,
//! [`Purge`](hookbox_core::Purge), are in [`purge`](crate::purge).
//!
//! A new key is told from a duplicate by the server's duplicate-key error, never by
//! an affected-row count or `INSERT IGNORE` (docs/design.md, "MySQL: claiming a key
//! without ON CONFLICT", has the argument): a plain `INSERT` either adds the key or
//! fails with error 1062, which InnoDB answers by rolling back that one statement
//! while the transaction goes on.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use hookbox_core::spi::ErasedSideEffect;
use hookbox_core::{
    Advance, BoxFuture, Claim, DedupeKey, IdempotencyStore, ProcessError, RetentionPolicy, Store,
    TimestampAdvance, VersionGuard,
};
use time::OffsetDateTime;

use crate::error::{MysqlError, TxError};
use crate::schema::{hookbox_processed_keys, hookbox_version_times, hookbox_versions};
use crate::store::MysqlStore;
use crate::watch::{insert_new, statement_failed};

/// Inserts the key; `true` when it was new. A copy of the key that another
/// transaction inserted and has not committed yet makes this wait (up to the lock
/// timeout) on InnoDB's duplicate check, then report a duplicate if that
/// transaction committed, or insert the key if it rolled back.
async fn insert_key(
    conn: &mut AsyncMysqlConnection,
    key: &DedupeKey,
) -> Result<bool, diesel::result::Error> {
    insert_new(conn, async |conn| {
        diesel::insert_into(hookbox_processed_keys::table)
            .values((
                hookbox_processed_keys::source.eq(key.scope()),
                hookbox_processed_keys::provider.eq(key.provider()),
                hookbox_processed_keys::delivery_id.eq(key.delivery_id()),
                hookbox_processed_keys::received_at.eq(utc_now()),
            ))
            .execute(conn)
            .await
    })
    .await
}

/// `UTC_TIMESTAMP(6)`: the server's clock in UTC to the microsecond, whatever the
/// session's time zone. A type of its own rather than `diesel::dsl::sql`, whose raw
/// SQL diesel never keeps prepared: the statements that use it (the claim, the
/// worker's due query) are prepared once per connection.
#[derive(Debug, Clone, Copy, diesel::query_builder::QueryId)]
pub(crate) struct UtcNow;

impl diesel::Expression for UtcNow {
    type SqlType = diesel::sql_types::Datetime;
}

impl<QS> diesel::AppearsOnTable<QS> for UtcNow {}

impl<QS> diesel::SelectableExpression<QS> for UtcNow {}

impl diesel::expression::ValidGrouping<()> for UtcNow {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl diesel::query_builder::QueryFragment<diesel::mysql::Mysql> for UtcNow {
    fn walk_ast<'b>(
        &'b self,
        mut out: diesel::query_builder::AstPass<'_, 'b, diesel::mysql::Mysql>,
    ) -> QueryResult<()> {
        out.push_sql("UTC_TIMESTAMP(6)");
        Ok(())
    }
}

/// The server's clock in UTC (see [`UtcNow`]).
pub(crate) fn utc_now() -> UtcNow {
    UtcNow
}

impl Store for MysqlStore {
    type Conn = AsyncMysqlConnection;
    type Error = MysqlError;

    fn retention(&self) -> &RetentionPolicy {
        self.inner.options.retention()
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), MysqlError>> {
        Box::pin(self.with_connection(async |conn| {
            // the inbox's first page: the server answers and the schema is there
            diesel::sql_query("SELECT 1 FROM hookbox_inbox LIMIT 1")
                .execute(conn)
                .await
                .map_err(MysqlError::query)?;
            Ok(())
        }))
    }
}

impl IdempotencyStore for MysqlStore {
    fn claim<'a>(
        &'a self,
        conn: &'a mut AsyncMysqlConnection,
        key: &'a DedupeKey,
    ) -> BoxFuture<'a, Result<Claim, MysqlError>> {
        Box::pin(async move {
            match insert_key(conn, key).await {
                Ok(true) => Ok(Claim::New),
                Ok(false) => Ok(Claim::Duplicate),
                Err(err) => Err(MysqlError::query(err)),
            }
        })
    }

    fn process_once_erased<'a>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: ErasedSideEffect<'a, AsyncMysqlConnection>,
    ) -> BoxFuture<'a, Result<Claim, ProcessError<MysqlError>>> {
        Box::pin(self.with_connection(async move |conn| {
            let outcome = conn
                .transaction(async move |conn| {
                    if !insert_key(conn, key).await? {
                        // nothing written; the commit releases the shared lock the
                        // duplicate check took on the stored key
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
                TxError::Db(err) => ProcessError::Store(MysqlError::query(err)),
                TxError::StatementFailed => ProcessError::Store(MysqlError::StatementFailed),
                TxError::User(err) => ProcessError::SideEffect(err),
            })
        }))
    }
}

/// Defines `$name`, which stores `value` for `object` in `$table.$column` if it is
/// greater than the stored one and returns the value stored before (`None`: there
/// was none). The row stays locked until the caller's transaction ends, so a
/// concurrent advance of the same object waits and then compares against the
/// committed value. (MySQL has no `ON CONFLICT … DO UPDATE … WHERE`, and an
/// `ON DUPLICATE KEY UPDATE`'s count cannot tell "updated" from "kept" under
/// `CLIENT_FOUND_ROWS`: the row is read, locked, then written.)
macro_rules! advance_row {
    ($name:ident, $table:ident, $column:ident) => {
        async fn $name(
            conn: &mut AsyncMysqlConnection,
            object: &str,
            value: i64,
        ) -> Result<Option<i64>, MysqlError> {
            // at most twice: a concurrent first advance of the object can insert it
            // between this read (which finds nothing, and under READ COMMITTED
            // locks no gap) and the insert, which then fails as a duplicate; the
            // second read finds and locks it
            for _ in 0..2 {
                let stored: Option<i64> = $table::table
                    .find(object)
                    .select($table::$column)
                    .for_update()
                    .first(conn)
                    .await
                    .optional()
                    .map_err(MysqlError::query)?;
                if let Some(current) = stored {
                    if current < value {
                        diesel::update($table::table.find(object))
                            .set($table::$column.eq(value))
                            .execute(conn)
                            .await
                            .map_err(MysqlError::query)?;
                    }
                    return Ok(Some(current));
                }
                let inserted = insert_new(conn, async |conn| {
                    diesel::insert_into($table::table)
                        .values(($table::object.eq(object), $table::$column.eq(value)))
                        .execute(conn)
                        .await
                })
                .await
                .map_err(MysqlError::query)?;
                if inserted {
                    return Ok(None);
                }
            }
            // inserted and then deleted by someone else in between: not something
            // the store does (the guards' rows are never purged)
            Err(MysqlError::Query(diesel::result::Error::NotFound))
        }
    };
}

advance_row!(advance_version, hookbox_versions, version);
advance_row!(advance_time, hookbox_version_times, at_micros);

impl VersionGuard for MysqlStore {
    fn advance<'a>(
        &'a self,
        conn: &'a mut AsyncMysqlConnection,
        object: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Advance, MysqlError>> {
        Box::pin(async move {
            Ok(match advance_version(conn, object, version).await? {
                None => Advance::Applied,
                Some(current) if current < version => Advance::Applied,
                Some(_) => Advance::Stale,
            })
        })
    }

    fn advance_at<'a>(
        &'a self,
        conn: &'a mut AsyncMysqlConnection,
        object: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<TimestampAdvance, MysqlError>> {
        Box::pin(async move {
            let micros = unix_micros(at);
            Ok(match advance_time(conn, object, micros).await? {
                None => TimestampAdvance::Applied,
                Some(current) if current < micros => TimestampAdvance::Applied,
                Some(current) if current == micros => TimestampAdvance::Unknown,
                Some(_) => TimestampAdvance::Stale,
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
