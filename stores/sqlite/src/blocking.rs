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
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel::{OptionalExtension as _, QueryDsl as _, QueryResult, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness as _, embed_migrations};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    Advance, Claim, DedupeKey, HandlerError, ProcessResult, Processed, TimestampAdvance,
};

pub use crate::connect::connect;
use crate::error::{SqliteError, TxError};
use crate::rows::micros;
use crate::schema::hookbox_version_times::dsl as times;

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

/// The claim for `$key`: `INSERT … ON CONFLICT DO NOTHING`; one row inserted means
/// this transaction claimed the key. Built (not `sql_query`) so that it is prepared
/// once per connection; a macro because the sync and async paths run it through
/// different `RunQueryDsl` traits.
macro_rules! claim_query {
    ($key:expr) => {{
        use crate::schema::hookbox_processed_keys::dsl as keys;
        use diesel::ExpressionMethods as _;
        let key: &hookbox_core::DedupeKey = $key;
        diesel::insert_into(keys::hookbox_processed_keys)
            .values((
                keys::source.eq(key.scope()),
                keys::provider.eq(key.provider()),
                keys::delivery_id.eq(key.delivery_id()),
                keys::received_at.eq(crate::rows::micros(
                    hookbox_core::time::OffsetDateTime::now_utc(),
                )),
            ))
            .on_conflict_do_nothing()
    }};
}
pub(crate) use claim_query;

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

/// Stores `version` for `object` only when it is newer; the upsert's `WHERE` makes
/// "not newer" a no-op (zero rows changed).
pub(crate) struct AdvanceVersion<'a> {
    pub(crate) object: &'a str,
    pub(crate) version: i64,
}

impl QueryId for AdvanceVersion<'_> {
    type QueryId = AdvanceVersion<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for AdvanceVersion<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO hookbox_versions (object, version) VALUES (");
        out.push_bind_param::<Text, _>(self.object)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.version)?;
        out.push_sql(
            ") ON CONFLICT (object) DO UPDATE SET version = excluded.version \
             WHERE excluded.version > hookbox_versions.version",
        );
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for AdvanceVersion<'_> {}

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

/// Stores `at_micros` for `object` only when it is strictly later.
pub(crate) struct AdvanceTime<'a> {
    pub(crate) object: &'a str,
    pub(crate) at_micros: i64,
}

impl QueryId for AdvanceTime<'_> {
    type QueryId = AdvanceTime<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for AdvanceTime<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO hookbox_version_times (object, at_micros) VALUES (");
        out.push_bind_param::<Text, _>(self.object)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.at_micros)?;
        out.push_sql(
            ") ON CONFLICT (object) DO UPDATE SET at_micros = excluded.at_micros \
             WHERE excluded.at_micros > hookbox_version_times.at_micros",
        );
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for AdvanceTime<'_> {}

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
