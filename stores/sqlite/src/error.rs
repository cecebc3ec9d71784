//! The crate's error, and the error of a transaction that runs user code.

use std::error::Error as StdError;

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use hookbox_core::{AnyStoreError, BoxFuture, HandlerError, ProcessError, StoreError};

/// The pool's error type, as diesel-async's deadpool integration names it.
pub(crate) type DeadpoolError = diesel_async::pooled_connection::deadpool::PoolError;

/// What went wrong in the SQLite store.
///
/// [`StoreError::is_transient`] tells an HTTP edge whether the sender should retry
/// (5xx): a busy database, a full disk or a failed open may pass; a malformed query
/// or an unreadable row will not.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// The options cannot work (for example `:memory:`, which each pooled connection
    /// would open as a separate, empty database).
    #[error("invalid sqlite store configuration: {0}")]
    Config(&'static str),
    /// [`SqliteStore::open`](crate::SqliteStore::open) was called on a
    /// current-thread tokio runtime. diesel-async's `SyncConnectionWrapper`, which
    /// runs every statement, calls `tokio::task::block_in_place` when a query's
    /// future is dropped, and that panics on a current-thread runtime: use a
    /// multi-threaded one (`#[tokio::main(flavor = "multi_thread")]`, or
    /// `#[tokio::test(flavor = "multi_thread")]` in tests).
    #[error(
        "the sqlite store needs a multi-threaded tokio runtime, not a current-thread one; \
         use #[tokio::main(flavor = \"multi_thread\")]"
    )]
    CurrentThreadRuntime,
    /// The database file could not be opened or a connection could not be set up
    /// (the `PRAGMA`s every connection runs).
    #[error("could not open the sqlite database")]
    Connect(#[source] diesel::ConnectionError),
    /// The connection pool failed for another reason.
    #[error("could not get a connection from the pool")]
    Pool(#[source] DeadpoolError),
    /// Another connection held the write lock for longer than the busy timeout.
    #[error("the database stayed locked for longer than the busy timeout")]
    Busy(#[source] DieselError),
    /// The disk failed or is full.
    #[error("the database file could not be read or written")]
    Io(#[source] DieselError),
    /// A query failed.
    #[error("a query failed")]
    Query(#[source] DieselError),
    /// The database file is no longer at its path (deleted, moved, or its disk
    /// unmounted); connections opened before still read the old file, so the store
    /// reports itself not ready.
    #[error("the sqlite database file {} is gone", .0.display())]
    Missing(std::path::PathBuf),
    /// Group commit: the writer's queue stayed full for the configured
    /// `queue_timeout`. Nothing was stored; an HTTP edge answers 503 with
    /// `Retry-After`, and the sender retries.
    #[error("the inbox writer is overloaded: its queue stayed full; retry later")]
    Overloaded,
    /// Group commit: the writer could not open its connection.
    #[error("the inbox writer could not open the database: {0}")]
    WriterUnavailable(String),
    /// Group commit: the transaction that held this delivery failed, so nothing of
    /// its batch was stored.
    #[error("the batch this delivery was written in failed: {reason}")]
    BatchFailed {
        /// Whether the batch's error was transient (a busy database, a full disk).
        transient: bool,
        /// The batch's error, with its causes.
        reason: String,
    },
    /// Applying the embedded migrations failed.
    #[error("applying the hookbox migrations failed")]
    Migration(#[source] Box<dyn StdError + Send + Sync>),
    /// An inbox row could not be read back into a delivery (edited by hand, or
    /// written by an incompatible version).
    #[error("inbox row {id} is unreadable: {what}")]
    Corrupt {
        /// The row's id.
        id: i64,
        /// Which field is wrong.
        what: &'static str,
    },
    /// An outbox message could not be read back (edited by hand, or written by an
    /// incompatible version).
    #[error("outbox message {seq} is unreadable: {what}")]
    OutboxCorrupt {
        /// The message's row.
        seq: i64,
        /// Which field is wrong.
        what: &'static str,
    },
}

impl SqliteError {
    /// Classifies a diesel error: SQLite reports a lock wait that outlasted the busy
    /// timeout and an I/O failure only through its message (the error kind is
    /// `Unknown`), so the message decides.
    pub(crate) fn from_diesel(err: DieselError) -> Self {
        let message = match &err {
            DieselError::DatabaseError(DatabaseErrorKind::Unknown, info) => info.message(),
            _ => return Self::Query(err),
        };
        if is_locked_message(message) {
            Self::Busy(err)
        } else if message.starts_with("disk I/O error")
            || message.starts_with("database or disk is full")
            || message.starts_with("unable to open database file")
        {
            Self::Io(err)
        } else {
            Self::Query(err)
        }
    }

    pub(crate) fn from_pool(err: DeadpoolError) -> Self {
        use diesel_async::pooled_connection::PoolError as Backend;
        use diesel_async::pooled_connection::deadpool::PoolError as Outer;
        match err {
            Outer::Backend(Backend::ConnectionError(err)) => Self::Connect(err),
            Outer::Backend(Backend::QueryError(err)) => Self::from_diesel(err),
            other => Self::Pool(other),
        }
    }
}

/// Whether `err` is SQLite refusing a lock another connection holds (the busy
/// timeout, if any, already spent).
pub(crate) fn is_locked(err: &DieselError) -> bool {
    matches!(err, DieselError::DatabaseError(DatabaseErrorKind::Unknown, info) if is_locked_message(info.message()))
}

/// sqlite3_errstr's texts for SQLITE_BUSY (every extended code) and SQLITE_LOCKED.
fn is_locked_message(message: &str) -> bool {
    message.starts_with("database is locked") || message.starts_with("database table is locked")
}

impl SqliteError {
    /// The error every caller of a failed batch gets: this one's text and
    /// transient classification (a diesel error cannot be cloned).
    pub(crate) fn for_batch(&self) -> Self {
        Self::BatchFailed {
            transient: self.is_transient(),
            reason: hookbox_core::error_chain(self),
        }
    }
}

impl From<DieselError> for SqliteError {
    fn from(err: DieselError) -> Self {
        Self::from_diesel(err)
    }
}

impl StoreError for SqliteError {
    fn is_transient(&self) -> bool {
        match self {
            // a lock holder commits, a disk frees up, a mount comes back, the pool
            // gets a connection back: the same call may then succeed
            Self::Busy(_)
            | Self::Io(_)
            | Self::Connect(_)
            | Self::Pool(_)
            | Self::Missing(_)
            | Self::Overloaded
            | Self::WriterUnavailable(_) => true,
            Self::BatchFailed { transient, .. } => *transient,
            Self::Config(_)
            | Self::CurrentThreadRuntime
            | Self::Query(_)
            | Self::Migration(_)
            | Self::Corrupt { .. }
            | Self::OutboxCorrupt { .. } => false,
        }
    }
}

/// Boxes an operator query with its error as [`AnyStoreError`]: the shape
/// [`InboxAdmin`](hookbox_core::InboxAdmin) and
/// [`OutboxAdmin`](hookbox_core::OutboxAdmin) return.
pub(crate) fn boxed_any<'a, T>(
    query: impl Future<Output = Result<T, SqliteError>> + Send + 'a,
) -> BoxFuture<'a, Result<T, AnyStoreError>> {
    Box::pin(async move { query.await.map_err(AnyStoreError::new) })
}

/// What ends a transaction that runs user code (a side effect or a handler): the
/// database's error, or the user code's own, which rolls the transaction back just
/// the same but is reported apart.
pub(crate) enum TxError {
    Db(DieselError),
    User(HandlerError),
}

impl From<DieselError> for TxError {
    fn from(err: DieselError) -> Self {
        Self::Db(err)
    }
}

impl TxError {
    /// The error `process_once` reports for it.
    pub(crate) fn into_process_error(self) -> ProcessError<SqliteError> {
        match self {
            Self::Db(err) => ProcessError::Store(SqliteError::from_diesel(err)),
            Self::User(err) => ProcessError::SideEffect(err),
        }
    }
}
