//! The connection pool, and the one rule for giving a connection back to it: a
//! connection that a store operation abandoned half-way, or whose error says it is
//! lost, is closed instead.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use deadpool::Runtime;
use deadpool::managed::{Object, PoolError as DeadpoolError, TimeoutType};
use diesel::ConnectionError;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, PoolError as ManagerError, RecyclingMethod,
};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection};
use hookbox_core::ProcessError;

use crate::error::MysqlError;
use crate::options::MysqlOptions;
use crate::tls::{self, Connector};
use crate::watch::{FailureWatch, in_transaction};

/// The pool of a [`MysqlStore`](crate::MysqlStore).
pub(crate) type ConnPool = Pool<AsyncMysqlConnection>;

/// Builds the pool for `url`; each connection, when opened (with TLS as the URL's
/// `ssl-mode` says), gets the failure watch and `options`' setup statements (UTC,
/// READ COMMITTED, the lock timeout, English messages, strict mode).
pub(crate) fn build(url: &str, options: &MysqlOptions) -> Result<ConnPool, MysqlError> {
    // parsed once: a wrong URL or TLS setting fails here, before any connection
    let connector = Arc::new(Connector::new(url, options)?);
    let setup_sql: Arc<str> = options.setup_sql().into();
    let mut config = ManagerConfig::<AsyncMysqlConnection>::default();
    // no test query on checkout: a connection with an open or failed transaction
    // is still refused (diesel-async checks its transaction state), and one whose
    // socket died is dropped by `PooledConnection` after its first error
    config.recycling_method = RecyclingMethod::Fast;
    // the connector holds the parsed URL: the manager's copy is not read again
    config.custom_setup = Box::new(move |_url| {
        let connector = Arc::clone(&connector);
        let setup_sql = Arc::clone(&setup_sql);
        Box::pin(async move {
            let mut conn = connector.establish().await?;
            conn.set_instrumentation(FailureWatch::new());
            conn.batch_execute(&setup_sql)
                .await
                .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        })
    });
    let manager = AsyncDieselConnectionManager::new_with_config(url, config);
    Pool::builder(manager)
        .max_size(options.max_connections())
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(options.pool_timeout()))
        .create_timeout(Some(options.pool_timeout()))
        .recycle_timeout(Some(options.pool_timeout()))
        .build()
        .map_err(|err| MysqlError::Pool(Box::new(err)))
}

pub(crate) fn pool_error(err: DeadpoolError<ManagerError>) -> MysqlError {
    match err {
        DeadpoolError::Timeout(TimeoutType::Wait) => MysqlError::PoolTimeout,
        DeadpoolError::Timeout(_) => MysqlError::Connect(ConnectionError::BadConnection(
            "no connection could be opened or checked within the pool timeout".into(),
        )),
        // a TLS failure comes back typed (`MysqlError::TlsCertificate`, …)
        DeadpoolError::Backend(ManagerError::ConnectionError(err)) => tls::connect_error(err),
        DeadpoolError::Backend(ManagerError::QueryError(err)) => MysqlError::query(err),
        other => MysqlError::Pool(Box::new(other)),
    }
}

/// A connection borrowed from a [`MysqlStore`](crate::MysqlStore)'s pool; dereferences to
/// [`AsyncMysqlConnection`] and goes back to the pool when dropped.
pub struct PooledConnection {
    object: Option<Object<AsyncDieselConnectionManager<AsyncMysqlConnection>>>,
    // set while a store operation runs on the connection: still set on drop means the
    // operation was abandoned half-way or lost its connection
    armed: bool,
}

/// The error of a store operation run by [`PooledConnection::run`]: the store's
/// own, or one that wraps it.
pub(crate) trait OperationError {
    /// Wraps a store error (a connection that could not be had).
    fn from_store(err: MysqlError) -> Self;
    /// Returns `true` when the error says the connection itself is unusable.
    fn breaks_connection(&self) -> bool;
}

impl OperationError for MysqlError {
    fn from_store(err: MysqlError) -> Self {
        err
    }

    fn breaks_connection(&self) -> bool {
        MysqlError::breaks_connection(self)
    }
}

impl OperationError for ProcessError<MysqlError> {
    fn from_store(err: MysqlError) -> Self {
        Self::Store(err)
    }

    fn breaks_connection(&self) -> bool {
        matches!(self, Self::Store(err) if err.breaks_connection())
    }
}

impl PooledConnection {
    /// Checks a connection out of `pool`.
    pub(crate) async fn get(pool: &ConnPool) -> Result<Self, MysqlError> {
        let object = pool.get().await.map_err(pool_error)?;
        Ok(Self {
            object: Some(object),
            armed: false,
        })
    }

    /// Runs one store operation on the connection, the one place that decides
    /// whether the connection may go back to the pool: not when `op` was abandoned
    /// half-way (its future dropped, so the connection may sit in an open
    /// transaction holding a claimed key's lock), and not when its error says the
    /// connection is lost. Either way dropping it then closes it, and the server
    /// rolls back and releases the locks at once.
    pub(crate) async fn run<T, E: OperationError>(
        &mut self,
        op: impl AsyncFnOnce(&mut AsyncMysqlConnection) -> Result<T, E>,
    ) -> Result<T, E> {
        self.armed = true;
        let result = op(self).await;
        self.armed = result.as_ref().err().is_some_and(E::breaks_connection);
        result
    }

    /// Takes the connection out of the pool for good.
    pub(crate) fn detach(mut self) -> AsyncMysqlConnection {
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
    type Target = AsyncMysqlConnection;

    fn deref(&self) -> &AsyncMysqlConnection {
        self.object.as_ref().expect("present until dropped")
    }
}

impl DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut AsyncMysqlConnection {
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
