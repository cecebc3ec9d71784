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

use std::path::Path;
use std::time::{Duration, Instant};

use diesel::connection::{AnsiTransactionManager, SimpleConnection as _, TransactionManager as _};
use diesel::sql_types::Text;
use diesel::sqlite::SqliteConnection;
use diesel::{
    Connection as _, OptionalExtension as _, QueryDsl as _, QueryableByName, RunQueryDsl as _,
};
use diesel_migrations::MigrationHarness as _;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    Advance, Claim, DedupeKey, HandlerError, ProcessError, ProcessResult, Processed,
    TimestampAdvance,
};

use crate::rows::micros;
use crate::schema::hookbox_version_times::dsl as times;
use crate::schema::{AdvanceTime, AdvanceVersion};
use crate::store::{self, MIGRATIONS, TxError};
use crate::{SqliteError, SqliteOptions};

/// Opens a connection to the database at `path` set up as the store's pool sets up
/// each of its own: `busy_timeout`, `journal_mode = WAL`, `synchronous`,
/// `foreign_keys = ON`. The schema is not touched: call [`migrate`].
///
/// # Errors
/// [`SqliteError::Config`] for an in-memory database or a path that is not UTF-8;
/// [`SqliteError::Connect`] when the file cannot be opened or refuses WAL mode.
pub fn connect(
    path: impl AsRef<Path>,
    options: &SqliteOptions,
) -> Result<SqliteConnection, SqliteError> {
    let url = store::file_url(path.as_ref())?;
    let mut conn = SqliteConnection::establish(url).map_err(SqliteError::Connect)?;
    set_up(&mut conn, options)
        .map_err(|err| {
            SqliteError::Connect(diesel::ConnectionError::CouldntSetupConfiguration(err))
        })?
        .map_err(SqliteError::Connect)?;
    Ok(conn)
}

/// Runs the store's `PRAGMA`s on a new connection. The outer error is a failed
/// statement; the inner one a file that refused WAL mode.
pub(crate) fn set_up(
    conn: &mut SqliteConnection,
    options: &SqliteOptions,
) -> diesel::QueryResult<Result<(), diesel::ConnectionError>> {
    // the busy timeout first, so that switching to WAL waits for a lock rather than
    // failing while another process is writing
    let busy = options.busy_timeout.as_millis().min(i32::MAX as u128);
    conn.batch_execute(&format!("PRAGMA busy_timeout = {busy}"))?;
    let mode = switch_to_wal(conn, options.busy_timeout)?;
    conn.batch_execute(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
        options.synchronous.pragma()
    ))?;
    Ok(if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        // e.g. a file system without shared memory: readers would block writers, and
        // the durability documented for this store would not hold
        Err(diesel::ConnectionError::BadConnection(format!(
            "sqlite refused WAL mode (journal_mode is {mode})"
        )))
    })
}

#[derive(QueryableByName)]
struct JournalMode {
    #[diesel(sql_type = Text)]
    journal_mode: String,
}

/// Switches the file to WAL, retrying while another connection holds the lock.
///
/// SQLite answers "database is locked" to `journal_mode = WAL` without calling the
/// busy handler when another connection is converting the same new file at that
/// moment (several processes or pool connections opening it at once), so the wait
/// the busy timeout promises is done here, bounded by the same timeout.
fn switch_to_wal(conn: &mut SqliteConnection, timeout: Duration) -> diesel::QueryResult<String> {
    let deadline = Instant::now() + timeout;
    loop {
        match diesel::sql_query("PRAGMA journal_mode = WAL").get_result::<JournalMode>(conn) {
            Ok(mode) => return Ok(mode.journal_mode),
            Err(diesel::result::Error::DatabaseError(_, info))
                if info.message().contains("locked") && Instant::now() < deadline =>
            {
                // never on an async worker thread: a short sleep stalls nobody
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) => return Err(err),
        }
    }
}

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
    let inserted = store::claim_query!(key).execute(conn)?;
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
/// [`ProcessError::Store`] when the database failed (nothing committed);
/// [`ProcessError::SideEffect`] with the side effect's own error.
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
            .map_err(TxError::SideEffect)
    })
    .map_err(|err| match err {
        TxError::Db(err) => ProcessError::Store(SqliteError::from_diesel(err)),
        TxError::SideEffect(err) => ProcessError::SideEffect(err),
    })
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
