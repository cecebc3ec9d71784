//! Configuration, the connection pool and migrations.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use deadpool::Runtime;
use deadpool::managed::{Object, PoolError as DeadpoolError, TimeoutType};
use diesel::ConnectionError;
use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError as ManagerError, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use hookbox_core::{RetentionPolicy, RetryPolicy};

use crate::PgError;

/// The schema migrations, embedded at compile time and applied by [`PgStore::migrate`].
const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// The advisory lock that serializes concurrent `migrate` calls ("hookbox" in ASCII).
const MIGRATION_LOCK: i64 = 0x0068_6f6f_6b62_6f78;

/// How a [`PgStore`] is configured.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use hookbox_diesel_pg::PgOptions;
///
/// let options = PgOptions::new()
///     .max_connections(16)
///     .lock_timeout(Duration::from_secs(2))
///     .schema("webhooks");
/// assert_eq!(options.get_max_connections(), 16);
/// ```
#[derive(Debug, Clone)]
pub struct PgOptions {
    max_connections: usize,
    retention: RetentionPolicy,
    retry: RetryPolicy,
    lock_timeout: Duration,
    pool_timeout: Duration,
    schema: Option<String>,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            retention: RetentionPolicy::default(),
            retry: RetryPolicy::default(),
            lock_timeout: Duration::from_secs(5),
            pool_timeout: Duration::from_secs(5),
            schema: None,
        }
    }
}

impl PgOptions {
    /// The defaults: 8 connections, the default retention and retry policies, a 5 s
    /// lock timeout, a 5 s pool timeout, the role's default `search_path`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the most connections the pool opens (default 8, at least 1).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Sets how long keys and processed inbox rows are kept (default: 30 days for
    /// every provider). Build it with [`RetentionPolicy::keep`], which refuses a rule
    /// shorter than the provider's resend window.
    pub fn retention(mut self, retention: RetentionPolicy) -> Self {
        self.retention = retention;
        self
    }

    /// Sets how failed inbox rows are retried and when they become dead letters
    /// (default: 5 attempts, backoff from 1 s to 1 h with full jitter).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the longest a statement waits for a row lock (default 5 s): the server's
    /// `lock_timeout`, set on every pooled connection.
    ///
    /// A concurrent copy of a delivery blocks on the first copy's uncommitted key and
    /// then reports a duplicate; this bounds the wait, so a stuck transaction cannot
    /// hang every receiver. A wait that runs out fails with the transient
    /// [`PgError::LockTimeout`]. Zero disables the bound (not recommended).
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Sets how long a call waits for a free pooled connection, and for a new one
    /// to open (default 5 s). A wait that runs out fails with the transient
    /// [`PgError::PoolTimeout`] or [`PgError::Connect`].
    pub fn pool_timeout(mut self, timeout: Duration) -> Self {
        self.pool_timeout = timeout;
        self
    }

    /// Puts the hookbox tables in `schema`: every pooled connection runs
    /// `SET search_path TO "<schema>"`, so your side effects see that schema too
    /// (qualify your own tables if they live elsewhere). The schema must exist; the
    /// name must be a plain identifier (checked by [`PgStore::connect`]).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Returns the pool size.
    pub fn get_max_connections(&self) -> usize {
        self.max_connections
    }

    /// Returns the retention policy.
    pub fn get_retention(&self) -> &RetentionPolicy {
        &self.retention
    }

    /// Returns the retry policy.
    pub fn get_retry(&self) -> RetryPolicy {
        self.retry
    }

    /// Returns the lock timeout.
    pub fn get_lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// Returns the pool timeout.
    pub fn get_pool_timeout(&self) -> Duration {
        self.pool_timeout
    }

    /// Returns the schema, if one was set.
    pub fn get_schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The statements each new connection runs before the pool hands it out.
    fn setup_sql(&self) -> String {
        let mut sql = format!("SET lock_timeout = '{}ms'", self.lock_timeout.as_millis());
        if let Some(schema) = &self.schema {
            // validated by `check_schema`: no quote can appear in it
            sql.push_str(&format!("; SET search_path TO \"{schema}\""));
        }
        sql
    }
}

fn check_schema(schema: &str) -> Result<(), PgError> {
    let mut chars = schema.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && schema.len() <= 63;
    if valid {
        Ok(())
    } else {
        Err(PgError::InvalidSchema {
            name: schema.to_string(),
        })
    }
}

/// The PostgreSQL store: claims, the inbox and its worker, version guards and
/// retention over one connection pool. Cheap to clone (the clones share the pool).
///
/// Build it with [`PgStore::connect`], apply the schema with [`PgStore::migrate`],
/// then use it through [`IdempotencyStore`](hookbox_core::IdempotencyStore),
/// [`VersionGuard`](hookbox_core::VersionGuard) and [`Inbox`](hookbox_core::Inbox)
/// (and, for an operator's tool, as a `&dyn` [`InboxAdmin`](hookbox_core::InboxAdmin)).
/// Side effects and handlers run on its [`AsyncPgConnection`], the store's
/// [`Store::Conn`](hookbox_core::Store::Conn).
#[derive(Clone)]
pub struct PgStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pool: Pool<AsyncPgConnection>,
    pub(crate) options: PgOptions,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the URL may hold a password: show the options and the pool's state only
        let status = self.inner.pool.status();
        f.debug_struct("PgStore")
            .field("options", &self.inner.options)
            .field("pool_size", &status.size)
            .field("pool_available", &status.available)
            .finish()
    }
}

impl PgStore {
    /// Builds the pool for `url` (`postgres://user:password@host:port/database`) and
    /// opens one connection to check that the server is reachable.
    ///
    /// Each connection, when opened, sets `lock_timeout`, the `search_path` when a
    /// schema is configured, and asks for untranslated server messages
    /// (`lc_messages = 'C'`, where the role may set it) so errors are classified
    /// correctly. Connections are plain TCP: TLS is not supported yet.
    ///
    /// # Errors
    /// [`PgError::InvalidSchema`] for a bad schema name; [`PgError::Connect`]
    /// or [`PgError::PoolTimeout`] when no connection could be opened.
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self, PgError> {
        if let Some(schema) = options.get_schema() {
            check_schema(schema)?;
        }
        let setup_sql: Arc<str> = options.setup_sql().into();
        let mut config = ManagerConfig::<AsyncPgConnection>::default();
        // no test query on checkout: a connection with an open or failed transaction
        // is still refused (diesel-async checks its transaction state), and one whose
        // socket died is dropped by `PooledConnection` after its first error
        config.recycling_method = RecyclingMethod::Fast;
        config.custom_setup = Box::new(move |url| {
            let url = url.to_string();
            let setup_sql = Arc::clone(&setup_sql);
            Box::pin(async move {
                let mut conn = AsyncPgConnection::establish(&url).await?;
                conn.set_instrumentation(FailureWatch::new());
                // refused unless the role may set it; the server's setting stays then
                let _ = conn.batch_execute("SET lc_messages TO 'C'").await;
                conn.batch_execute(&setup_sql)
                    .await
                    .map_err(ConnectionError::CouldntSetupConfiguration)?;
                Ok(conn)
            })
        });
        let manager = AsyncDieselConnectionManager::new_with_config(url, config);
        let pool = Pool::builder(manager)
            .max_size(options.get_max_connections())
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.get_pool_timeout()))
            .create_timeout(Some(options.get_pool_timeout()))
            .recycle_timeout(Some(options.get_pool_timeout()))
            .build()
            .map_err(|err| PgError::Pool(Box::new(err)))?;
        let store = Self {
            inner: Arc::new(Inner { pool, options }),
        };
        drop(store.connection().await?);
        Ok(store)
    }

    /// Returns the options the store was built with.
    pub fn options(&self) -> &PgOptions {
        &self.inner.options
    }

    /// Applies the embedded migrations that have not run yet (creating or updating
    /// the `hookbox_*` tables in the configured schema) and returns how many it
    /// applied: zero when the schema is current. Safe to call from several processes
    /// at once: an advisory lock serializes them.
    ///
    /// Runs diesel's synchronous migration harness on a blocking thread
    /// (`spawn_blocking`), so it works on both tokio runtime flavours.
    ///
    /// # Errors
    /// [`PgError::Migration`] when a migration fails; connection errors as for
    /// any call.
    pub async fn migrate(&self) -> Result<usize, PgError> {
        let conn = self.connection().await?;
        // the connection leaves the pool: the blocking harness owns it, and it is
        // closed afterwards, releasing the advisory lock with it
        let conn = conn.detach();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let _guard = handle.enter();
            let mut conn = diesel_async::async_connection_wrapper::AsyncConnectionWrapper::<
                AsyncPgConnection,
            >::from(conn);
            diesel::connection::SimpleConnection::batch_execute(
                &mut conn,
                &format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"),
            )
            .map_err(PgError::query)?;
            conn.run_pending_migrations(MIGRATIONS)
                .map(|applied| applied.len())
                .map_err(PgError::Migration)
        })
        .await
        .map_err(|err| PgError::Migration(Box::new(err)))?
    }

    /// Takes a connection from the pool, for the caller-owned form: begin your own
    /// `conn.transaction(async |conn| …)`, call
    /// [`IdempotencyStore::claim`](hookbox_core::IdempotencyStore::claim) inside it,
    /// then your side effect.
    ///
    /// The connection goes back to the pool when dropped, unless a transaction is
    /// still open on it (a transaction future dropped half-way): then it is closed, so
    /// the server rolls back and releases the claimed key's lock at once instead of
    /// when the pool would next look at the connection.
    ///
    /// # Errors
    /// [`PgError::PoolTimeout`] when none became free within the pool timeout;
    /// [`PgError::Connect`] when a new one could not be opened.
    pub async fn connection(&self) -> Result<PooledConnection, PgError> {
        let object = self.inner.pool.get().await.map_err(pool_error)?;
        Ok(PooledConnection {
            object: Some(object),
            armed: false,
        })
    }
}

/// Watches a connection's statements for one that failed inside a transaction.
///
/// PostgreSQL aborts a transaction at its first failed statement and answers a later
/// `COMMIT` with a silent `ROLLBACK`. A side effect that swallows a statement's error
/// and returns `Ok` would therefore have the store report the delivery as applied
/// while nothing, not even the key, was committed: the sender gets its 2xx and never
/// retries. The store checks this watch before committing and rolls back instead.
struct FailureWatch {
    // the instrumentation the connection had (diesel's global default), still fed
    inner: Option<Box<dyn Instrumentation>>,
    depth: u32,
    // the outermost transaction depth at which a statement failed, until a rollback
    // to or above that depth undoes it
    failed_at: Option<u32>,
}

impl FailureWatch {
    fn new() -> Self {
        Self {
            inner: diesel::connection::get_default_instrumentation(),
            depth: 0,
            failed_at: None,
        }
    }
}

impl Instrumentation for FailureWatch {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        match &event {
            InstrumentationEvent::BeginTransaction { depth, .. } => {
                self.depth = depth.get();
                if self.depth == 1 {
                    self.failed_at = None;
                }
            }
            InstrumentationEvent::FinishQuery { error: Some(_), .. } if self.depth > 0 => {
                let depth = self.depth;
                self.failed_at = Some(self.failed_at.map_or(depth, |at| at.min(depth)));
            }
            InstrumentationEvent::RollbackTransaction { depth, .. } => {
                if self.failed_at.is_some_and(|at| at >= depth.get()) {
                    self.failed_at = None;
                }
                self.depth = depth.get() - 1;
            }
            InstrumentationEvent::CommitTransaction { depth, .. } => {
                self.depth = depth.get() - 1;
            }
            _ => {}
        }
        if let Some(inner) = &mut self.inner {
            inner.on_connection_event(event);
        }
    }
}

/// Returns `true` when a statement failed in the open transaction (or the savepoint
/// the caller is in) and was not rolled back: committing would silently roll back.
pub(crate) fn statement_failed(conn: &mut AsyncPgConnection) -> bool {
    // a connection whose instrumentation was replaced is not watched: no claim
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.failed_at.is_some())
}

/// Returns `true` while a transaction (begun through diesel's transaction manager) is
/// open on the connection.
fn in_transaction(conn: &mut AsyncPgConnection) -> bool {
    conn.instrumentation()
        .downcast_ref::<FailureWatch>()
        .is_some_and(|watch| watch.depth > 0)
}

fn pool_error(err: DeadpoolError<ManagerError>) -> PgError {
    match err {
        DeadpoolError::Timeout(TimeoutType::Wait) => PgError::PoolTimeout,
        DeadpoolError::Timeout(_) => PgError::Connect(ConnectionError::BadConnection(
            "no connection could be opened or checked within the pool timeout".into(),
        )),
        DeadpoolError::Backend(ManagerError::ConnectionError(err)) => PgError::Connect(err),
        DeadpoolError::Backend(ManagerError::QueryError(err)) => PgError::query(err),
        other => PgError::Pool(Box::new(other)),
    }
}

/// A connection borrowed from a [`PgStore`]'s pool; dereferences to
/// [`AsyncPgConnection`] and goes back to the pool when dropped.
pub struct PooledConnection {
    object: Option<Object<AsyncDieselConnectionManager<AsyncPgConnection>>>,
    // set while a store operation runs on the connection: still set on drop means the
    // operation was abandoned half-way or lost its connection
    armed: bool,
}

impl PooledConnection {
    /// Marks the start of a store operation: if the connection is dropped before
    /// [`PooledConnection::settle`], the operation was abandoned half-way and the
    /// connection is closed rather than returned to the pool.
    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    /// Marks the end of a store operation; `error` is its error, if it failed. A lost
    /// connection is closed rather than returned to the pool.
    pub(crate) fn settle(&mut self, error: Option<&PgError>) {
        self.armed = error.is_some_and(PgError::breaks_connection);
    }

    /// Takes the connection out of the pool for good.
    fn detach(mut self) -> AsyncPgConnection {
        let object = self.object.take().expect("present until dropped");
        Object::take(object)
    }
}

impl fmt::Debug for PooledConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection").finish_non_exhaustive()
    }
}

impl Deref for PooledConnection {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        self.object.as_ref().expect("present until dropped")
    }
}

impl DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        self.object.as_mut().expect("present until dropped")
    }
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        let abandoned = self.armed
            || self
                .object
                .as_mut()
                .is_some_and(|conn| in_transaction(conn));
        if abandoned && let Some(object) = self.object.take() {
            // dropping the connection closes its socket; the server rolls back
            // whatever transaction it had open and releases its locks now, not
            // when the pool would next look at it
            drop(Object::take(object));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["hookbox", "hb_0123abcd", "_private", "Webhooks"] {
            assert!(check_schema(good).is_ok(), "{good}");
        }
        for bad in ["", "1st", "a;b", "a\"b", "a b", "schéma", &"x".repeat(64)] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn setup_sets_the_lock_timeout_and_search_path() {
        let sql = PgOptions::new()
            .lock_timeout(Duration::from_millis(1500))
            .schema("hb_test")
            .setup_sql();
        assert_eq!(
            sql,
            "SET lock_timeout = '1500ms'; SET search_path TO \"hb_test\""
        );
    }
}
