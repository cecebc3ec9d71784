//! A small pool of SQLite connections, each set up with the store's `PRAGMA`s.
//!
//! diesel-async's deadpool integration does the pooling. This module adds the one
//! rule SQLite needs on top: a connection handed back with a transaction still open
//! (its future was dropped mid-transaction) is closed at once, which rolls the
//! transaction back and releases the database's write lock, instead of waiting in
//! the pool, lock held, until the next checkout notices.

use std::ops::{Deref, DerefMut};

use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::{AsyncConnection, TransactionManager};

use crate::connect::{Conn, connect_async};
use crate::error::SqliteError;
use crate::options::SqliteOptions;

pub(crate) type ConnPool = Pool<Conn>;

/// Builds the pool; connections are opened on first use.
pub(crate) fn build(url: &str, options: &SqliteOptions) -> Result<ConnPool, SqliteError> {
    let setup = options.clone();
    let mut config = ManagerConfig::default();
    // `Fast`: no `SELECT 1` round trip per checkout; a broken transaction state is
    // still checked on every recycle, and `PooledConnection` closes such
    // connections before they get back to the pool
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(move |url| {
        let url = url.to_string();
        let options = setup.clone();
        Box::pin(connect_async(url, options))
    });
    let manager = AsyncDieselConnectionManager::<Conn>::new_with_config(url, config);
    Pool::builder(manager)
        .max_size(options.max_connections)
        .build()
        .map_err(|_| SqliteError::Config("the connection pool could not be built"))
}

/// A connection checked out of the store's pool, for the caller-owned form of a
/// claim ([`SqliteStore::connection`](crate::SqliteStore::connection)).
///
/// It dereferences to [`Conn`]. Dropped with a transaction still open (a future
/// cancelled mid-transaction), it closes the connection instead of returning it to
/// the pool: SQLite rolls the transaction back and releases its write lock.
pub struct PooledConnection {
    inner: Option<Object<Conn>>,
}

impl PooledConnection {
    pub(crate) async fn get(pool: &ConnPool) -> Result<Self, SqliteError> {
        let object = pool.get().await.map_err(SqliteError::from_pool)?;
        Ok(Self {
            inner: Some(object),
        })
    }
}

impl PooledConnection {
    /// Closes the connection instead of handing it back to the pool: for a
    /// connection whose settings were changed and could not be put back.
    pub(crate) fn discard(mut self) {
        if let Some(object) = self.inner.take() {
            drop(Object::take(object));
        }
    }
}

impl std::fmt::Debug for PooledConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledConnection").finish_non_exhaustive()
    }
}

impl Deref for PooledConnection {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        // `inner` is `None` only inside `drop`
        self.inner.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for PooledConnection {
    fn deref_mut(&mut self) -> &mut Conn {
        self.inner.as_deref_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for PooledConnection {
    fn drop(&mut self) {
        let Some(mut object) = self.inner.take() else {
            return;
        };
        // A cancelled query has finished by now (diesel-async waits for the
        // blocking task when its future is dropped), so the transaction state is
        // ours to read.
        let broken = std::thread::panicking()
            || <<Conn as AsyncConnection>::TransactionManager as TransactionManager<Conn>>::is_broken_transaction_manager(
                &mut object,
            );
        if broken {
            // closing the connection rolls its open transaction back now
            drop(Object::take(object));
        }
    }
}
