//! The store type: its pool and options, shared by every clone, and its inherent
//! methods (open, migrate, a connection, the blocking `process_once`). Claims and
//! version guards are in [`claims`](crate::claims), retention in
//! [`purge`](crate::purge), the inbox and the outbox (with their operator's verbs)
//! in [`inbox`](crate::inbox) and [`outbox`](crate::outbox).

use std::path::Path;
use std::sync::Arc;

use diesel::sqlite::SqliteConnection;
use hookbox_core::{CommitMode, DedupeKey, HandlerError, ProcessError, ProcessResult};
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::blocking;
use crate::connect::file_url;
use crate::error::SqliteError;
use crate::options::SqliteOptions;
use crate::pool::{self, ConnPool, PooledConnection};

/// Claims dedupe keys, keeps the inbox and orders updates, in one SQLite file.
///
/// Cheap to clone: clones share one connection pool. Open it once, call
/// [`SqliteStore::migrate`], and hand clones to the HTTP handlers and workers. See
/// the [crate documentation](crate) for the guarantees.
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) pool: ConnPool,
    pub(crate) options: SqliteOptions,
    /// The file, for the readiness check: open connections still read a file that
    /// was deleted or replaced, so [`Store::ping`](hookbox_core::Store::ping) looks
    /// at the path too.
    pub(crate) path: std::path::PathBuf,
    /// The group-commit writer, when [`CommitMode::Grouped`].
    pub(crate) writer: Option<crate::writer::Writer>,
    /// `process_once`'s turn at the write lock, in arrival order (see there).
    pub(crate) inline_turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and checks that a
    /// connection can be set up. `path` is a file path or an SQLite `file:` URI.
    ///
    /// Every connection runs `PRAGMA busy_timeout`, `journal_mode = WAL`,
    /// `synchronous` (see [`Synchronous`](crate::Synchronous)) and
    /// `foreign_keys = ON`. The schema is not touched: call
    /// [`SqliteStore::migrate`].
    ///
    /// Call it on a multi-threaded tokio runtime
    /// (`#[tokio::main(flavor = "multi_thread")]`): the store's connections run
    /// each statement on tokio's blocking pool, and a query whose future is dropped
    /// waits for its statement with `block_in_place`, which panics on a
    /// current-thread runtime. `open` refuses one up front instead.
    ///
    /// # Errors
    /// [`SqliteError::CurrentThreadRuntime`] on a current-thread tokio runtime
    /// (`#[tokio::main]` without a flavor is multi-threaded, `#[tokio::test]` is
    /// not); [`SqliteError::Config`] for an in-memory database or a path that is
    /// not UTF-8; [`SqliteError::Connect`] when the file cannot be opened or
    /// refuses WAL mode.
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, SqliteError> {
        // refused here rather than found out as a panic on the first cancelled
        // query (a client that disconnects mid-request, a timeout)
        if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::CurrentThread) {
            return Err(SqliteError::CurrentThreadRuntime);
        }
        let url = file_url(path.as_ref())?;
        let pool = pool::build(url, &options)?;
        // open one connection now, so a wrong path fails here and not on the first
        // delivery
        drop(PooledConnection::get(&pool).await?);
        let writer = match options.commit {
            CommitMode::Grouped(config) => Some(crate::writer::Writer::start(
                path.as_ref().to_path_buf(),
                options.clone(),
                config,
            )?),
            CommitMode::PerRequest => None,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                options,
                path: path.as_ref().to_path_buf(),
                writer,
                inline_turn: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Returns what the group-commit writer committed since the store was opened
    /// (`None` with [`CommitMode::PerRequest`]): the bench reads deliveries per commit
    /// from it.
    pub fn group_commit_stats(&self) -> Option<hookbox_core::GroupCommitStats> {
        self.inner.writer.as_ref().map(crate::writer::Writer::stats)
    }

    /// Applies the embedded migrations that are not applied yet; returns how many
    /// ran.
    ///
    /// Safe to call from several processes at once: the migrations run in one
    /// `BEGIN IMMEDIATE` transaction, so a second caller waits for the first and then
    /// finds nothing to do.
    ///
    /// # Errors
    /// [`SqliteError::Migration`] when a migration fails (nothing is applied), or a
    /// database error.
    pub async fn migrate(&self) -> Result<usize, SqliteError> {
        let mut conn = self.connection().await?;
        conn.spawn_blocking(|conn: &mut SqliteConnection| Ok(blocking::migrate(conn)))
            .await?
    }

    /// Checks a connection out of the store's pool, for the caller-owned form:
    /// begin a transaction on it (prefer
    /// [`immediate_transaction`](diesel_async::sync_connection_wrapper::SyncConnectionWrapper::immediate_transaction),
    /// so the write lock is taken at `BEGIN`), call
    /// [`claim`](hookbox_core::IdempotencyStore::claim) inside, and commit.
    ///
    /// # Errors
    /// The pool could not open a connection.
    pub async fn connection(&self) -> Result<PooledConnection, SqliteError> {
        PooledConnection::get(&self.inner.pool).await
    }

    /// [`process_once`](hookbox_core::IdempotencyStore::process_once) for a
    /// synchronous side effect: the claim, the side effect and the commit run in one
    /// trip to tokio's blocking pool instead of one per statement, which is the fast
    /// path when the side effect is a few diesel statements (`docs/performance.md`
    /// measures both).
    /// The same SQL, transaction and outcomes as `process_once`, and the same
    /// shapes: the side effect takes the connection and returns
    /// `Result<T, HandlerError>`, so `?` works on any error; see
    /// [`blocking::process_once`].
    ///
    /// # Examples
    /// ```
    /// use diesel::RunQueryDsl as _;
    /// use hookbox_core::{DedupeKey, Processed};
    /// use hookbox_sqlite::{SqliteOptions, SqliteStore};
    ///
    /// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("hookbox-pob-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("hookbox.db");
    /// let store = SqliteStore::open(&path, SqliteOptions::default()).await?;
    /// store.migrate().await?;
    /// let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
    /// let outcome = store
    ///     .process_once_blocking(&key, |conn| {
    ///         diesel::sql_query("CREATE TABLE IF NOT EXISTS seen (id TEXT)").execute(conn)?;
    ///         Ok(diesel::sql_query("INSERT INTO seen VALUES ('evt_1')").execute(conn)?)
    ///     })
    ///     .await?;
    /// assert_eq!(outcome, Processed::Applied(1));
    /// # drop(store);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`ProcessError::Store`] when the database failed (nothing committed);
    /// [`ProcessError::SideEffect`] with the side effect's error (rolled back, key
    /// released).
    pub async fn process_once_blocking<T, F>(
        &self,
        key: &DedupeKey,
        side_effect: F,
    ) -> ProcessResult<T, SqliteError>
    where
        F: FnOnce(&mut SqliteConnection) -> Result<T, HandlerError> + Send + 'static,
        T: Send + 'static,
    {
        let mut conn = self.connection().await.map_err(ProcessError::Store)?;
        let key = key.clone();
        conn.spawn_blocking(move |conn: &mut SqliteConnection| {
            Ok(blocking::process_once(conn, &key, side_effect))
        })
        .await
        .map_err(|err| ProcessError::Store(SqliteError::from_diesel(err)))?
    }

    /// Returns the options the store was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.inner.options
    }
}
