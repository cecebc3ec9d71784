//! The store type: its pool and options, shared by every clone.

use std::fmt;
use std::sync::Arc;

use diesel_async::AsyncMysqlConnection;

use hookbox_core::CommitMode;

use crate::error::MysqlError;
use crate::options::MysqlOptions;
use crate::pool::{self, ConnPool, OperationError, PooledConnection};

/// The MySQL and MariaDB store: claims, the inbox and its worker, version guards
/// and retention over one connection pool. Cheap to clone (the clones share the
/// pool).
///
/// Build it with [`MysqlStore::connect`], apply the schema with
/// [`MysqlStore::migrate`], then use it through
/// [`IdempotencyStore`](hookbox_core::IdempotencyStore),
/// [`VersionGuard`](hookbox_core::VersionGuard), [`Inbox`](hookbox_core::Inbox),
/// [`OutboxStore`](hookbox_core::OutboxStore) and [`Purge`](hookbox_core::Purge)
/// (and, for an operator's tool, as a `&dyn` [`InboxAdmin`](hookbox_core::InboxAdmin)
/// or [`OutboxAdmin`](hookbox_core::OutboxAdmin)).
/// Side effects and handlers run on its [`AsyncMysqlConnection`], the store's
/// [`Store::Conn`](hookbox_core::Store::Conn).
#[derive(Clone)]
pub struct MysqlStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pool: ConnPool,
    pub(crate) options: MysqlOptions,
    /// The group-commit writers, when [`CommitMode::Grouped`].
    pub(crate) writer: Option<crate::writer::Writer>,
}

impl fmt::Debug for MysqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the URL may hold a password: show the options and the pool's state only
        let status = self.inner.pool.status();
        f.debug_struct("MysqlStore")
            .field("options", &self.inner.options)
            .field("pool_size", &status.size)
            .field("pool_available", &status.available)
            .finish()
    }
}

impl MysqlStore {
    /// Builds the pool for `url` (`mysql://user:password@host:port/database`, with
    /// `ssl-mode` and `ssl-ca` among its parameters, and any of mysql_async's
    /// others) and opens one connection to check that the server is reachable.
    ///
    /// Each connection, when opened, sets the session's time zone to UTC, READ
    /// COMMITTED, the lock timeout, English server messages (so errors are
    /// classified correctly) and strict mode. It uses TLS as `ssl-mode` says
    /// (default `PREFERRED`: TLS when the server offers it); see the crate's
    /// [TLS](crate#tls) section.
    ///
    /// # Errors
    /// [`MysqlError::InvalidSslMode`] or [`MysqlError::TlsSettings`] for TLS settings
    /// that cannot work, and [`MysqlError::Connect`] for a malformed URL, all before
    /// any connection is opened; [`MysqlError::TlsNotSupported`],
    /// [`MysqlError::TlsCertificate`] or [`MysqlError::TlsHandshake`] when the server
    /// cannot be talked to as `ssl-mode` requires; [`MysqlError::Connect`] or
    /// [`MysqlError::PoolTimeout`] when no connection could be opened.
    pub async fn connect(url: &str, options: MysqlOptions) -> Result<Self, MysqlError> {
        let pool = pool::build(url, &options)?;
        let writer = match options.commit_mode() {
            CommitMode::Grouped(config) => {
                let writers = options.group_commit_writers();
                let pool_size = options.max_connections();
                if writers >= pool_size {
                    // it still works, the stages wait for each other's connections
                    tracing::warn!(
                        writers,
                        max_connections = pool_size,
                        "the group-commit writers take the whole pool; the lookup and \
                         other callers wait for them (raise max_connections above the \
                         writers)"
                    );
                }
                Some(crate::writer::Writer::start(pool.clone(), config, writers))
            }
            CommitMode::PerRequest => None,
        };
        let store = Self {
            inner: Arc::new(Inner {
                pool,
                options,
                writer,
            }),
        };
        drop(store.connection().await?);
        Ok(store)
    }

    /// Returns what the group-commit writers committed since the store was opened
    /// (`None` with [`CommitMode::PerRequest`]): the bench reads deliveries per
    /// statement from it.
    pub fn group_commit_stats(&self) -> Option<hookbox_core::GroupCommitStats> {
        self.inner.writer.as_ref().map(crate::writer::Writer::stats)
    }

    /// Returns the options the store was built with.
    pub fn options(&self) -> &MysqlOptions {
        &self.inner.options
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
    /// [`MysqlError::PoolTimeout`] when none became free within the pool timeout;
    /// [`MysqlError::Connect`] when a new one could not be opened.
    pub async fn connection(&self) -> Result<PooledConnection, MysqlError> {
        PooledConnection::get(&self.inner.pool).await
    }

    /// Runs one store operation on a pooled connection (see
    /// [`PooledConnection::run`] for when the connection is closed instead of
    /// returned).
    pub(crate) async fn with_connection<T, E: OperationError>(
        &self,
        op: impl AsyncFnOnce(&mut AsyncMysqlConnection) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut conn = self.connection().await.map_err(E::from_store)?;
        conn.run(op).await
    }
}
