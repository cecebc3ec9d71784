//! What the server mode needs from a database, in one trait per concern: [`Backend`]
//! (the store, its connections, schemas and the server's version) and [`SimConn`]
//! (the script's statements on a connection). Everything else (the replay, the
//! crash test, the worker processes, the tables) is written once over them.
//!
//! The statements are diesel's query builder, the same text for every backend:
//! [`sim_conn!`] implements [`SimConn`] for a connection type from one body, with
//! only the ledger's cast differing.

use std::future::Future;
use std::io;
use std::ops::DerefMut;

use hookbox_core::{StoreError, VersionGuard};
use hookbox_diesel_pg::diesel::QueryResult;

use crate::seed::Event;
use crate::table::EndRows;

/// A database the server mode replays on.
pub(super) trait Backend: Send + Sync + 'static {
    /// The server's name in the header and the tables ("Postgres", "MySQL").
    const NAME: &'static str;
    /// What a run's namespaces are on this server ("schemas", "databases").
    const NAMESPACES: &'static str;
    /// The server's short name in the timings ("pg", "mysql").
    const TAG: &'static str;

    /// The connection the script's statements and hookbox's side effects run on.
    type Conn: SimConn + 'static;
    /// hookbox's store on this server.
    type Store: VersionGuard<Conn = Self::Conn, Error = Self::Error> + Clone + 'static;
    /// The store's error (a statement's error converts into it, so a failed side
    /// effect is classified as the store's own are).
    type Error: StoreError + From<hookbox_diesel_pg::diesel::result::Error>;
    /// A connection checked out of the store's pool.
    type Pooled: DerefMut<Target = Self::Conn> + Send + 'static;

    /// Connects a store with a pool of `connections` to the namespace `name`.
    fn store(
        url: &str,
        name: &str,
        connections: usize,
    ) -> impl Future<Output = io::Result<Self::Store>> + Send;

    /// Checks a connection out of `store`'s pool.
    fn connection(store: &Self::Store) -> impl Future<Output = io::Result<Self::Pooled>> + Send;

    /// Creates the namespace `name` with the script's tables and its accounts (not
    /// hookbox's tables: the caller migrates).
    fn create(url: &str, name: &str) -> impl Future<Output = io::Result<()>> + Send;

    /// Drops the namespace `name` and everything in it, if it exists.
    fn drop(url: &str, name: &str) -> impl Future<Output = io::Result<()>> + Send;

    /// Runs hookbox's migrations on `store`.
    fn migrate(store: &Self::Store) -> impl Future<Output = io::Result<()>> + Send;

    /// The server's version, for the header.
    fn server_version(url: &str) -> impl Future<Output = io::Result<String>> + Send;
}

/// The script's statements on one connection.
pub(super) trait SimConn: Send {
    /// `s.credit` and `s.applied`: the credit side effect.
    fn credit<'c>(
        &'c mut self,
        id: &'c str,
        acct: i32,
    ) -> impl Future<Output = QueryResult<()>> + Send + 'c;

    /// `apply(s, e)` without an ordering guard; returns `true` for a stale write (an
    /// older plan overwrote a newer one).
    ///
    /// Call it inside a transaction: the account row is read `FOR UPDATE`, so the
    /// version it compares with is the one it overwrites, and the stale-write count
    /// is exact under concurrency (a plain read could be overtaken before the write).
    fn apply<'c>(&'c mut self, e: &'c Event)
    -> impl Future<Output = QueryResult<bool>> + Send + 'c;

    /// Runs [`apply`](SimConn::apply) in a transaction of its own.
    fn apply_in_tx<'c>(
        &'c mut self,
        e: &'c Event,
    ) -> impl Future<Output = QueryResult<bool>> + Send + 'c;

    /// `s.seen`: the check of check-then-insert.
    fn seen<'c>(&'c mut self, id: &'c str) -> impl Future<Output = QueryResult<bool>> + Send + 'c;

    /// `s.mark`: the insert of check-then-insert, a statement of its own (autocommit).
    fn mark<'c>(&'c mut self, id: &'c str) -> impl Future<Output = QueryResult<()>> + Send + 'c;

    /// What the namespace holds at the end of a handler's run, for its table row.
    fn end_rows(&mut self) -> impl Future<Output = io::Result<EndRows>> + Send + '_;

    /// `sum(credits)` over the accounts.
    fn ledger(&mut self) -> impl Future<Output = io::Result<i64>> + Send + '_;

    /// Runs `SELECT … AS n` returning one BIGINT.
    fn count<'c>(&'c mut self, sql: &'c str) -> impl Future<Output = io::Result<i64>> + Send + 'c;
}

/// Implements [`SimConn`] for `$conn` with the script's statements; `$ledger` is the
/// `SELECT … AS s` that sums the credits as a BIGINT in that dialect.
macro_rules! sim_conn {
    ($conn:ty, $ledger:expr) => {
        impl $crate::server::backend::SimConn for $conn {
            async fn credit<'c>(
                &'c mut self,
                id: &'c str,
                acct: i32,
            ) -> ::hookbox_diesel_pg::diesel::QueryResult<()> {
                use ::hookbox_diesel_pg::diesel::{self, ExpressionMethods as _, QueryDsl as _};
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                use $crate::schema::{accounts, applied};
                diesel::update(accounts::table.find(acct))
                    .set(accounts::credits.eq(accounts::credits + 100i64))
                    .execute(&mut *self)
                    .await?;
                diesel::insert_into(applied::table)
                    .values(applied::event_id.eq(id))
                    .execute(self)
                    .await
                    .map(drop)
            }

            async fn apply<'c>(
                &'c mut self,
                e: &'c $crate::seed::Event,
            ) -> ::hookbox_diesel_pg::diesel::QueryResult<bool> {
                use ::hookbox_diesel_pg::diesel::{self, ExpressionMethods as _, QueryDsl as _};
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                use $crate::schema::{accounts, applied};
                if e.kind == $crate::seed::Kind::Credit {
                    self.credit(&e.id, e.acct).await?;
                    return Ok(false);
                }
                let current: i64 = accounts::table
                    .find(e.acct)
                    .select(accounts::plan_version)
                    .for_update()
                    .first(&mut *self)
                    .await?;
                diesel::update(accounts::table.find(e.acct))
                    .set((
                        accounts::plan.eq(format!("plan_v{}", e.version)),
                        accounts::plan_version.eq(e.version),
                        accounts::plan_created.eq(e.created),
                    ))
                    .execute(&mut *self)
                    .await?;
                diesel::insert_into(applied::table)
                    .values(applied::event_id.eq(&e.id))
                    .execute(self)
                    .await?;
                Ok(e.version < current)
            }

            async fn apply_in_tx<'c>(
                &'c mut self,
                e: &'c $crate::seed::Event,
            ) -> ::hookbox_diesel_pg::diesel::QueryResult<bool> {
                use ::hookbox_diesel_pg::diesel_async::AsyncConnection as _;
                self.transaction(async move |conn| {
                    $crate::server::backend::SimConn::apply(conn, e).await
                })
                .await
            }

            async fn seen<'c>(
                &'c mut self,
                id: &'c str,
            ) -> ::hookbox_diesel_pg::diesel::QueryResult<bool> {
                use ::hookbox_diesel_pg::diesel::{self, QueryDsl as _};
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                use $crate::schema::processed_events;
                diesel::select(diesel::dsl::exists(processed_events::table.find(id)))
                    .get_result(self)
                    .await
            }

            async fn mark<'c>(
                &'c mut self,
                id: &'c str,
            ) -> ::hookbox_diesel_pg::diesel::QueryResult<()> {
                use ::hookbox_diesel_pg::diesel::{self, ExpressionMethods as _};
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                use $crate::schema::processed_events;
                diesel::insert_into(processed_events::table)
                    .values(processed_events::event_id.eq(id))
                    .execute(self)
                    .await
                    .map(drop)
            }

            async fn end_rows(&mut self) -> ::std::io::Result<$crate::table::EndRows> {
                use ::hookbox_diesel_pg::diesel;
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                use $crate::error::failed;
                use $crate::schema::{APPLIED_COUNTS, AppliedCount, PLAN_VERSIONS, PlanVersion};
                let applied = diesel::sql_query(APPLIED_COUNTS)
                    .load::<AppliedCount>(&mut *self)
                    .await
                    .map_err(|e| failed("counting applies", &e))?;
                let accounts = diesel::sql_query(PLAN_VERSIONS)
                    .load::<PlanVersion>(&mut *self)
                    .await
                    .map_err(|e| failed("reading the accounts", &e))?;
                let ledger = self.ledger().await?;
                Ok($crate::schema::end_rows(applied, accounts, ledger))
            }

            async fn ledger(&mut self) -> ::std::io::Result<i64> {
                use ::hookbox_diesel_pg::diesel;
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                diesel::sql_query($ledger)
                    .get_result::<$crate::schema::Sum>(self)
                    .await
                    .map(|s| s.s.unwrap_or(0))
                    .map_err(|e| $crate::error::failed("summing the ledger", &e))
            }

            async fn count<'c>(&'c mut self, sql: &'c str) -> ::std::io::Result<i64> {
                use ::hookbox_diesel_pg::diesel;
                use ::hookbox_diesel_pg::diesel_async::RunQueryDsl as _;
                diesel::sql_query(sql)
                    .get_result::<$crate::schema::Count>(self)
                    .await
                    .map(|c| c.n)
                    .map_err(|e| $crate::error::failed("counting rows", &e))
            }
        }
    };
}

pub(super) use sim_conn;
