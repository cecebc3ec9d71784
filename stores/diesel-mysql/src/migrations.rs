//! The embedded schema migrations and [`MysqlStore::migrate`].

use diesel_async::AsyncMysqlConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness as _, embed_migrations};

use crate::error::MysqlError;
use crate::store::MysqlStore;

/// The schema migrations, embedded at compile time and applied by
/// [`MysqlStore::migrate`].
const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// The named lock that serializes concurrent `migrate` calls, and how long one
/// waits for it (seconds).
const MIGRATION_LOCK: &str = "SELECT GET_LOCK('hookbox_migrate', 600)";

impl MysqlStore {
    /// Applies the embedded migrations that have not run yet (creating or updating
    /// the `hookbox_*` tables in the URL's database) and returns how many it
    /// applied: zero when the schema is current. Safe to call from several processes
    /// at once: a named lock (`GET_LOCK`) serializes them.
    ///
    /// MySQL commits each DDL statement on its own, so a migration that fails
    /// half-way leaves the statements before the failure applied: read the error,
    /// fix the cause, and drop what it created before running it again.
    ///
    /// Runs diesel's synchronous migration harness on a blocking thread
    /// (`spawn_blocking`), so it works on both tokio runtime flavours.
    ///
    /// # Errors
    /// [`MysqlError::Migration`] when a migration fails; connection errors as for
    /// any call.
    pub async fn migrate(&self) -> Result<usize, MysqlError> {
        let conn = self.connection().await?;
        // the connection leaves the pool: the blocking harness owns it, and it is
        // closed afterwards, releasing the named lock with it
        let conn = conn.detach();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let _guard = handle.enter();
            let mut conn = AsyncConnectionWrapper::<AsyncMysqlConnection>::from(conn);
            diesel::connection::SimpleConnection::batch_execute(&mut conn, MIGRATION_LOCK)
                .map_err(MysqlError::query)?;
            conn.run_pending_migrations(MIGRATIONS)
                .map(|applied| applied.len())
                .map_err(MysqlError::Migration)
        })
        .await
        .map_err(|err| MysqlError::Migration(Box::new(err)))?
    }
}
