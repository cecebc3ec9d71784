//! The embedded schema migrations and [`PgStore::migrate`].

use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness as _, embed_migrations};

use crate::error::PgError;
use crate::store::PgStore;

/// The schema migrations, embedded at compile time and applied by [`PgStore::migrate`].
const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// The advisory lock that serializes concurrent `migrate` calls ("hookbox" in ASCII).
const MIGRATION_LOCK: i64 = 0x0068_6f6f_6b62_6f78;

impl PgStore {
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
            let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::from(conn);
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
}
