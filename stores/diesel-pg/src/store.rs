//! The store type: its pool and options, shared by every clone.

use std::fmt;
use std::sync::Arc;

use diesel_async::AsyncPgConnection;

use hookbox_core::CommitMode;

use crate::error::PgError;
use crate::options::{PgOptions, check_schema};
use crate::pool::{self, ConnPool, OperationError, PooledConnection};

/// The PostgreSQL store: claims, the inbox and its worker, version guards and
/// retention over one connection pool. Cheap to clone (the clones share the pool).
///
/// Build it with [`PgStore::connect`], apply the schema with [`PgStore::migrate`],
/// then use it through [`IdempotencyStore`](hookbox_core::IdempotencyStore),
/// [`VersionGuard`](hookbox_core::VersionGuard), [`Inbox`](hookbox_core::Inbox),
/// [`OutboxStore`](hookbox_core::OutboxStore) and [`Purge`](hookbox_core::Purge)
/// (and, for an operator's tool, as a `&dyn` [`InboxAdmin`](hookbox_core::InboxAdmin)
/// or [`OutboxAdmin`](hookbox_core::OutboxAdmin)).
/// Side effects and handlers run on its [`AsyncPgConnection`], the store's
/// [`Store::Conn`](hookbox_core::Store::Conn).
#[derive(Clone)]
pub struct PgStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pool: ConnPool,
    pub(crate) options: PgOptions,
    /// The group-commit writers, when [`CommitMode::Grouped`].
    pub(crate) writer: Option<crate::writer::Writer>,
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
    /// Builds the pool for `url` (`postgres://user:password@host:port/database`,
    /// with libpq's `sslmode` and `sslrootcert` among its parameters, or the
    /// `key=value` form) and opens one connection to check that the server is
    /// reachable.
    ///
    /// Each connection, when opened, sets `lock_timeout`, the `search_path` when a
    /// schema is configured, and asks for untranslated server messages
    /// (`lc_messages = 'C'`, where the role may set it) so errors are classified
    /// correctly. It uses TLS as `sslmode` says (default `prefer`: TLS when the
    /// server offers it); see the crate's [TLS](crate#tls) section.
    ///
    /// # Errors
    /// [`PgError::InvalidSchema`] for a bad schema name; [`PgError::InvalidSslMode`]
    /// or [`PgError::TlsSettings`] for TLS settings that cannot work, and
    /// [`PgError::Connect`] for a malformed URL, all before any connection is
    /// opened; [`PgError::TlsNotSupported`], [`PgError::TlsCertificate`] or
    /// [`PgError::TlsHandshake`] when the server cannot be talked to as `sslmode`
    /// requires; [`PgError::Connect`] or [`PgError::PoolTimeout`] when no
    /// connection could be opened.
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self, PgError> {
        if let Some(schema) = options.schema() {
            check_schema(schema)?;
        }
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
    pub fn options(&self) -> &PgOptions {
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
    /// [`PgError::PoolTimeout`] when none became free within the pool timeout;
    /// [`PgError::Connect`] when a new one could not be opened.
    pub async fn connection(&self) -> Result<PooledConnection, PgError> {
        PooledConnection::get(&self.inner.pool).await
    }

    /// Runs one store operation on a pooled connection (see
    /// [`PooledConnection::run`] for when the connection is closed instead of
    /// returned).
    pub(crate) async fn with_connection<T, E: OperationError>(
        &self,
        op: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut conn = self.connection().await.map_err(E::from_store)?;
        conn.run(op).await
    }
}
