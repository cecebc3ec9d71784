//! The store's claim, transaction and version guard on a plain, synchronous
//! [`SqliteConnection`], for side effects written as sync diesel code.
//!
//! Through [`Conn`](crate::Conn) every statement is one trip to tokio's blocking
//! pool, and a claim with a small side effect is four or five of them.
//! [`SqliteStore::process_once_blocking`](crate::SqliteStore::process_once_blocking)
//! makes the whole transaction one trip: the claim and a sync side effect run
//! together on a blocking thread, with the same SQL and the same guarantees as
//! [`process_once`](hookbox_core::IdempotencyStore::process_once).
//!
//! The functions here are that path without a runtime, for programs that are sync
//! already (a batch job, a CLI, `hookbox sim`): open a connection with [`connect`]
//! (the store's `PRAGMA`s), [`migrate`] once, then [`process_once`] per delivery.
//!
//! # Examples
//! ```
//! use diesel::RunQueryDsl;
//! use hookbox_core::{DedupeKey, HandlerError, Processed};
//! use hookbox_sqlite::{SqliteOptions, blocking};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("hookbox-blocking-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let path = dir.join("hookbox.db");
//! let mut conn = blocking::connect(&path, &SqliteOptions::default())?;
//! blocking::migrate(&mut conn)?;
//! # diesel::sql_query("CREATE TABLE credits (account TEXT PRIMARY KEY, balance INTEGER)")
//! #     .execute(&mut conn)?;
//!
//! let key = DedupeKey::new("billing", "stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! // the side effect returns `Result<_, HandlerError>`: `?` converts diesel's error
//! let credit = |conn: &mut diesel::SqliteConnection| -> Result<usize, HandlerError> {
//!     Ok(diesel::sql_query(
//!         "INSERT INTO credits VALUES ('acct_1', 100) \
//!          ON CONFLICT (account) DO UPDATE SET balance = balance + 100",
//!     )
//!     .execute(conn)?)
//! };
//! assert_eq!(blocking::process_once(&mut conn, &key, credit)?, Processed::Applied(1));
//! // the provider retries: the key is there, the credit does not run again
//! assert_eq!(blocking::process_once(&mut conn, &key, credit)?, Processed::Duplicate);
//! # drop(conn);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

use diesel::connection::{AnsiTransactionManager, TransactionManager as _};
use diesel::sqlite::SqliteConnection;
use diesel::{OptionalExtension as _, QueryDsl as _, RunQueryDsl as _};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness as _, embed_migrations};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    Advance, Claim, DedupeKey, HandlerError, ProcessResult, Processed, TimestampAdvance,
};

pub use crate::connect::connect;
use crate::error::{SqliteError, TxError};
use crate::rows::micros;
use crate::sql::hookbox_version_times::dsl as times;
use crate::sql::{AdvanceTime, AdvanceVersion, claim_query};

/// The schema, embedded in the binary; applied by [`migrate`].
const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// Applies the embedded migrations that are not applied yet; returns how many ran.
/// They run in one `BEGIN IMMEDIATE` transaction, so concurrent callers (other
/// processes) wait for the first and then find nothing to do.
///
/// # Errors
/// [`SqliteError::Migration`] when a migration fails (nothing is applied), or a
/// database error.
pub fn migrate(conn: &mut SqliteConnection) -> Result<usize, SqliteError> {
    AnsiTransactionManager::begin_transaction_sql(conn, "BEGIN IMMEDIATE")?;
    match conn.run_pending_migrations(MIGRATIONS) {
        Ok(applied) => {
            let count = applied.len();
            AnsiTransactionManager::commit_transaction(conn)?;
            Ok(count)
        }
        Err(err) => {
            AnsiTransactionManager::rollback_transaction(conn)?;
            Err(SqliteError::Migration(err))
        }
    }
}

/// Inserts `key` on a connection inside the caller's transaction (begin it with
/// [`SqliteConnection::immediate_transaction`]); [`Claim::New`] means this
/// transaction claimed it and its side effect should run before the commit.
///
/// # Errors
/// The database failed; roll the transaction back.
pub fn claim(conn: &mut SqliteConnection, key: &DedupeKey) -> Result<Claim, SqliteError> {
    Ok(insert_key(conn, key)?)
}

fn insert_key(conn: &mut SqliteConnection, key: &DedupeKey) -> diesel::QueryResult<Claim> {
    let inserted = claim_query!(key).execute(conn)?;
    Ok(if inserted == 1 {
        Claim::New
    } else {
        Claim::Duplicate
    })
}

/// Claims `key` and runs `side_effect` on the same connection in one
/// `BEGIN IMMEDIATE` transaction, committing both or neither: the synchronous
/// [`IdempotencyStore::process_once`](hookbox_core::IdempotencyStore::process_once).
///
/// A duplicate key returns [`Processed::Duplicate`] without running the side effect.
/// A side-effect error rolls the transaction back, key included, so a retry runs it
/// again. The side effect returns `Result<T, HandlerError>`, as the async one does,
/// so `?` converts any error it meets.
///
/// # Errors
/// [`ProcessError::Store`](hookbox_core::ProcessError::Store) when the database
/// failed (nothing committed);
/// [`ProcessError::SideEffect`](hookbox_core::ProcessError::SideEffect) with the
/// side effect's own error.
pub fn process_once<T>(
    conn: &mut SqliteConnection,
    key: &DedupeKey,
    side_effect: impl FnOnce(&mut SqliteConnection) -> Result<T, HandlerError>,
) -> ProcessResult<T, SqliteError> {
    // BEGIN IMMEDIATE takes the write lock up front: a concurrent copy waits at BEGIN
    // for this one to commit, then finds the key
    conn.immediate_transaction(|conn| {
        if insert_key(conn, key)? == Claim::Duplicate {
            return Ok(Processed::Duplicate);
        }
        side_effect(conn)
            .map(Processed::Applied)
            .map_err(TxError::User)
    })
    .map_err(TxError::into_process_error)
}

/// Stores `version` for `object` only when it is newer than the stored one, inside
/// the caller's transaction: the synchronous
/// [`VersionGuard::advance`](hookbox_core::VersionGuard::advance).
///
/// # Errors
/// The database failed; roll the transaction back.
pub fn advance(
    conn: &mut SqliteConnection,
    object: &str,
    version: i64,
) -> Result<Advance, SqliteError> {
    let changed = AdvanceVersion { object, version }.execute(conn)?;
    Ok(if changed == 1 {
        Advance::Applied
    } else {
        Advance::Stale
    })
}

/// Stores `at` for `object` only when it is strictly later than the stored time,
/// inside the caller's transaction; a tie is [`TimestampAdvance::Unknown`]: the
/// synchronous [`VersionGuard::advance_at`](hookbox_core::VersionGuard::advance_at).
///
/// # Errors
/// The database failed; roll the transaction back.
pub fn advance_at(
    conn: &mut SqliteConnection,
    object: &str,
    at: OffsetDateTime,
) -> Result<TimestampAdvance, SqliteError> {
    let at = micros(at);
    let changed = AdvanceTime {
        object,
        at_micros: at,
    }
    .execute(conn)?;
    if changed == 1 {
        return Ok(TimestampAdvance::Applied);
    }
    // not stored: the same time (a tie nobody can order) or an older one; the
    // caller's transaction holds the write lock, so this read is current
    let stored = times::hookbox_version_times
        .find(object)
        .select(times::at_micros)
        .get_result::<i64>(conn)
        .optional()?;
    Ok(match stored {
        Some(stored) if stored == at => TimestampAdvance::Unknown,
        _ => TimestampAdvance::Stale,
    })
}
