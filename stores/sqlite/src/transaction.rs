//! `BEGIN IMMEDIATE` and `BEGIN EXCLUSIVE` transactions on a [`Conn`].

use std::future::Future;

use diesel::connection::AnsiTransactionManager;
use diesel_async::TransactionManager as _;
use diesel_async::sync_connection_wrapper::SyncTransactionManagerWrapper;

use crate::connect::Conn;

/// An `async` closure whose future can be named, so that it can be required to be
/// `Send` (the same device diesel-async uses for its own transaction methods).
pub trait TransactionFn<T, R>:
    AsyncFnOnce(T) -> R + FnOnce(T) -> <Self as TransactionFn<T, R>>::Fut
{
    /// The closure's future.
    type Fut: Future<Output = R>;
}

impl<F, T, Fut, R> TransactionFn<T, R> for F
where
    F: AsyncFnOnce(T) -> R + FnOnce(T) -> Fut,
    Fut: Future<Output = R>,
{
    type Fut = Fut;
}

/// Transactions that take SQLite's write lock when they begin.
///
/// diesel-async offers these two methods on its default `SyncConnectionWrapper`
/// only; a [`Conn`] runs its statements through [`StatementRunner`](crate::StatementRunner),
/// so they come from this trait instead: `use hookbox_sqlite::ImmediateTransaction as _;`.
///
/// `BEGIN IMMEDIATE` is what a write transaction on SQLite wants: a plain `BEGIN`
/// takes the write lock at its first write and fails with `SQLITE_BUSY` (no busy
/// handler is called) when another connection wrote meanwhile.
///
/// # Examples
/// ```
/// use hookbox_sqlite::diesel::{self, sql_types::Text};
/// use hookbox_sqlite::diesel_async::RunQueryDsl as _;
/// use hookbox_sqlite::{Conn, ImmediateTransaction as _, SqliteError, SqliteStore};
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("hookbox-doc-tx-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = SqliteStore::open(dir.join("hookbox.db"), Default::default()).await?;
/// let mut conn = store.connection().await?;
/// conn.immediate_transaction(async |conn: &mut Conn| -> Result<(), SqliteError> {
///     diesel::sql_query("CREATE TABLE IF NOT EXISTS notes (text TEXT NOT NULL)")
///         .execute(conn)
///         .await?;
///     diesel::sql_query("INSERT INTO notes (text) VALUES (?)")
///         .bind::<Text, _>("committed with its claim, or not at all")
///         .execute(conn)
///         .await?;
///     Ok(())
/// })
/// .await?;
/// # drop(conn);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub trait ImmediateTransaction {
    /// Runs `f` in a `BEGIN IMMEDIATE` transaction: committed when `f` returns
    /// `Ok`, rolled back when it returns `Err`.
    fn immediate_transaction<'a, R, E, F>(
        &'a mut self,
        f: F,
    ) -> impl Future<Output = Result<R, E>> + Send + 'a
    where
        for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
            + TransactionFn<&'r mut Conn, Result<R, E>, Fut: Send>
            + Send
            + 'a,
        E: From<diesel::result::Error> + Send + 'a,
        R: Send + 'a;

    /// Runs `f` in a `BEGIN EXCLUSIVE` transaction (in WAL mode the same as
    /// `IMMEDIATE`).
    fn exclusive_transaction<'a, R, E, F>(
        &'a mut self,
        f: F,
    ) -> impl Future<Output = Result<R, E>> + Send + 'a
    where
        for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
            + TransactionFn<&'r mut Conn, Result<R, E>, Fut: Send>
            + Send
            + 'a,
        E: From<diesel::result::Error> + Send + 'a,
        R: Send + 'a;
}

impl ImmediateTransaction for Conn {
    fn immediate_transaction<'a, R, E, F>(
        &'a mut self,
        f: F,
    ) -> impl Future<Output = Result<R, E>> + Send + 'a
    where
        for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
            + TransactionFn<&'r mut Conn, Result<R, E>, Fut: Send>
            + Send
            + 'a,
        E: From<diesel::result::Error> + Send + 'a,
        R: Send + 'a,
    {
        transaction_sql(self, f, "BEGIN IMMEDIATE")
    }

    fn exclusive_transaction<'a, R, E, F>(
        &'a mut self,
        f: F,
    ) -> impl Future<Output = Result<R, E>> + Send + 'a
    where
        for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
            + TransactionFn<&'r mut Conn, Result<R, E>, Fut: Send>
            + Send
            + 'a,
        E: From<diesel::result::Error> + Send + 'a,
        R: Send + 'a,
    {
        transaction_sql(self, f, "BEGIN EXCLUSIVE")
    }
}

async fn transaction_sql<'a, R, E, F>(conn: &'a mut Conn, f: F, sql: &'static str) -> Result<R, E>
where
    for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
        + TransactionFn<&'r mut Conn, Result<R, E>, Fut: Send>
        + Send
        + 'a,
    E: From<diesel::result::Error> + Send + 'a,
    R: Send + 'a,
{
    conn.spawn_blocking(move |conn| AnsiTransactionManager::begin_transaction_sql(conn, sql))
        .await?;
    match f(&mut *conn).await {
        Ok(value) => {
            SyncTransactionManagerWrapper::<AnsiTransactionManager>::commit_transaction(conn)
                .await?;
            Ok(value)
        }
        Err(err) => {
            SyncTransactionManagerWrapper::<AnsiTransactionManager>::rollback_transaction(conn)
                .await?;
            Err(err)
        }
    }
}
