//! Claims and version guards: [`IdempotencyStore`] and [`VersionGuard`] for
//! [`SqliteStore`], with [`Store`] (the connection and error types, the readiness
//! check, the retention policy). Retention's deletes,
//! [`Purge`](hookbox_core::Purge), are in [`purge`](crate::purge).

use diesel::sqlite::SqliteConnection;
use diesel_async::RunQueryDsl as _;
use hookbox_core::spi::ErasedSideEffect;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    Advance, BoxFuture, Claim, DedupeKey, IdempotencyStore, ProcessError, RetentionPolicy, Store,
    TimestampAdvance, VersionGuard,
};

use crate::blocking::{self, claim_query};
use crate::connect::Conn;
use crate::error::{SqliteError, TxError};
use crate::store::SqliteStore;
use crate::transaction::ImmediateTransaction as _;

/// Inserts `key` through the async wrapper (one statement, one blocking-pool trip).
async fn insert_key(conn: &mut Conn, key: &DedupeKey) -> diesel::QueryResult<Claim> {
    let inserted = claim_query!(key).execute(conn).await?;
    Ok(if inserted == 1 {
        Claim::New
    } else {
        Claim::Duplicate
    })
}

/// The readiness check: reads the inbox's first page, writes nothing.
const PING: &str = "SELECT 1 FROM hookbox_inbox LIMIT 1";

impl Store for SqliteStore {
    type Conn = Conn;
    type Error = SqliteError;

    fn retention(&self) -> &RetentionPolicy {
        &self.inner.options.retention
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), SqliteError>> {
        Box::pin(async move {
            if !self.inner.path.is_file() {
                return Err(SqliteError::Missing(self.inner.path.clone()));
            }
            let mut conn = self.connection().await?;
            diesel::sql_query(PING).execute(&mut *conn).await?;
            Ok(())
        })
    }
}

impl IdempotencyStore for SqliteStore {
    fn claim<'a>(
        &'a self,
        conn: &'a mut Conn,
        key: &'a DedupeKey,
    ) -> BoxFuture<'a, Result<Claim, SqliteError>> {
        Box::pin(async move {
            insert_key(conn, key)
                .await
                .map_err(SqliteError::from_diesel)
        })
    }

    fn process_once_erased<'a>(
        &'a self,
        key: &'a DedupeKey,
        side_effect: ErasedSideEffect<'a, Conn>,
    ) -> BoxFuture<'a, Result<Claim, ProcessError<SqliteError>>> {
        Box::pin(async move {
            let mut conn = self.connection().await.map_err(ProcessError::Store)?;
            // one of this store's `process_once` transactions at a time, in arrival
            // order (tokio's mutex is fair): concurrent callers otherwise queue for
            // the write lock in SQLite's busy handler, whose sleeps grow to 100 ms,
            // and the unlucky waited seconds behind callers that came later. Past
            // the busy timeout (a side effect that calls `process_once` itself
            // never gives the turn back) it goes on without the turn, and the busy
            // handler decides as before
            let turn = self.inner.inline_turn.lock();
            let _turn = tokio::time::timeout(self.inner.options.busy_timeout, turn)
                .await
                .ok();
            // BEGIN IMMEDIATE takes the write lock up front: a concurrent copy waits
            // at BEGIN (up to the busy timeout) for this one to commit, then finds the
            // key; two deferred transactions could instead both read and then fail
            // to upgrade
            let outcome = conn
                .immediate_transaction(async move |conn: &mut Conn| {
                    if insert_key(conn, key).await? == Claim::Duplicate {
                        return Ok(Claim::Duplicate);
                    }
                    side_effect(conn, &&()).await.map_err(TxError::User)?;
                    Ok(Claim::New)
                })
                .await;
            outcome.map_err(TxError::into_process_error)
        })
    }
}

impl VersionGuard for SqliteStore {
    fn advance<'a>(
        &'a self,
        conn: &'a mut Conn,
        object: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Advance, SqliteError>> {
        let object = object.to_owned();
        Box::pin(async move {
            conn.spawn_blocking(move |conn: &mut SqliteConnection| {
                Ok(blocking::advance(conn, &object, version))
            })
            .await?
        })
    }

    fn advance_at<'a>(
        &'a self,
        conn: &'a mut Conn,
        object: &'a str,
        at: OffsetDateTime,
    ) -> BoxFuture<'a, Result<TimestampAdvance, SqliteError>> {
        let object = object.to_owned();
        Box::pin(async move {
            // the write and the read-back of a tie in one blocking-pool trip
            conn.spawn_blocking(move |conn: &mut SqliteConnection| {
                Ok(blocking::advance_at(conn, &object, at))
            })
            .await?
        })
    }
}
