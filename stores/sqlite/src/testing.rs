//! Test support for crates that test against a [`SqliteStore`]: a temporary
//! directory, a migrated store with a small `ledger` table for side effects to
//! write to, helpers that write and read that ledger, and [`SqliteHarness`], the
//! `hookbox-core` conformance harness for a plain store.
//!
//! Enabled by the `testing` feature; meant for dev-dependencies only. Helpers panic
//! on setup failures, since a panic there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use diesel::OptionalExtension as _;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::{RunQueryDsl as _, SimpleAsyncConnection as _};
use hookbox_core::testing::{Capabilities, Harness, Reclaim, Rotation, SuiteConfig};
use hookbox_core::{BoxFuture, Claim, DedupeKey, IdempotencyStore};
use hookbox_standard::{Standard, StandardSigner};

use crate::ImmediateTransaction as _;
use crate::{Conn, SqliteError, SqliteOptions, SqliteStore};

/// A fresh directory under the system temp directory, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a directory no other test, run or process shares.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "hookbox-sqlite-{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The database file in it (`hookbox.db`, not created yet).
    pub fn db(&self) -> PathBuf {
        self.0.join("hookbox.db")
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens a store on `path` with `options`, applies the migrations and creates the
/// ledger table: `ledger (account TEXT PRIMARY KEY, balance BIGINT NOT NULL DEFAULT
/// 0, plan TEXT)`.
pub async fn open(path: &Path, options: SqliteOptions) -> SqliteStore {
    let store = SqliteStore::open(path, options).await.unwrap();
    store.migrate().await.unwrap();
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query(
        "CREATE TABLE IF NOT EXISTS ledger (account TEXT PRIMARY KEY, \
         balance BIGINT NOT NULL DEFAULT 0, plan TEXT)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    store
}

/// The side effect: adds `amount` to `account`'s balance, on the caller's
/// connection (inside its transaction), with diesel's own error.
pub async fn credit_query(conn: &mut Conn, account: &str, amount: i64) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "INSERT INTO ledger (account, balance) VALUES (?, ?) \
         ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance",
    )
    .bind::<Text, _>(account)
    .bind::<BigInt, _>(amount)
    .execute(conn)
    .await?;
    Ok(())
}

/// [`credit_query`] with the store's [`SqliteError`].
pub async fn credit(conn: &mut Conn, account: &str, amount: i64) -> Result<(), SqliteError> {
    credit_query(conn, account, amount).await?;
    Ok(())
}

/// Sets `account`'s plan, on the caller's connection (inside its transaction).
pub async fn set_plan(conn: &mut Conn, account: &str, plan: &str) -> Result<(), SqliteError> {
    diesel::sql_query(
        "INSERT INTO ledger (account, plan) VALUES (?, ?) \
         ON CONFLICT (account) DO UPDATE SET plan = excluded.plan",
    )
    .bind::<Text, _>(account)
    .bind::<Text, _>(plan)
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Balance {
    #[diesel(sql_type = BigInt)]
    balance: i64,
}

#[derive(diesel::QueryableByName)]
struct Plan {
    #[diesel(sql_type = Nullable<Text>)]
    plan: Option<String>,
}

/// `account`'s balance (0 when it has no row).
pub async fn balance(store: &SqliteStore, account: &str) -> Result<i64, SqliteError> {
    let mut conn = store.connection().await?;
    let row = diesel::sql_query("SELECT balance FROM ledger WHERE account = ?")
        .bind::<Text, _>(account)
        .get_result::<Balance>(&mut *conn)
        .await
        .optional()?;
    Ok(row.map_or(0, |r| r.balance))
}

/// `account`'s plan (`None` when it has no row or no plan).
pub async fn plan(store: &SqliteStore, account: &str) -> Result<Option<String>, SqliteError> {
    let mut conn = store.connection().await?;
    let row = diesel::sql_query("SELECT plan FROM ledger WHERE account = ?")
        .bind::<Text, _>(account)
        .get_result::<Plan>(&mut *conn)
        .await
        .optional()?;
    Ok(row.and_then(|r| r.plan))
}

/// The ledger's total over every account.
pub async fn total(store: &SqliteStore) -> i64 {
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query("SELECT COALESCE(SUM(balance), 0) AS balance FROM ledger")
        .get_result::<Balance>(&mut *conn)
        .await
        .unwrap()
        .balance
}

/// The conformance harness for a plain [`SqliteStore`]: one temp file per test.
#[derive(Debug)]
pub struct SqliteHarness {
    store: SqliteStore,
    _dir: TempDir,
}

impl SqliteHarness {
    /// The store's options for the suite's `config`, for harnesses of stores that
    /// wrap a [`SqliteStore`].
    pub fn options(config: SuiteConfig) -> SqliteOptions {
        SqliteOptions::default()
            .with_retention(config.retention)
            .with_retry(config.retry)
            .with_lease(config.lease)
            .with_busy_timeout(config.lock_timeout)
    }
}

impl Harness for SqliteHarness {
    type Conn = Conn;
    type Error = SqliteError;
    type Store = SqliteStore;

    // no row locks: a worker leases its row
    const CAPABILITIES: Capabilities = Capabilities {
        reclaim: Reclaim::WhenLeaseExpires,
    };

    fn rotation() -> Option<Rotation> {
        Rotation::from_secrets(Standard::new, StandardSigner::new)
    }

    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self> {
        Box::pin(async move {
            let dir = TempDir::new();
            let store = open(&dir.db(), Self::options(config)).await;
            Self { store, _dir: dir }
        })
    }

    fn store(&self) -> &SqliteStore {
        &self.store
    }

    fn credit<'c>(
        conn: &'c mut Conn,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), SqliteError>> {
        Box::pin(credit(conn, account, amount))
    }

    fn set_plan<'c>(
        conn: &'c mut Conn,
        account: &'c str,
        plan: &'c str,
    ) -> BoxFuture<'c, Result<(), SqliteError>> {
        Box::pin(set_plan(conn, account, plan))
    }

    fn balance<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<i64, SqliteError>> {
        Box::pin(balance(&self.store, account))
    }

    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, SqliteError>> {
        Box::pin(plan(&self.store, account))
    }

    fn refuse_inbox_row<'a>(&'a self, delivery_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(refuse_inbox_row(&self.store, delivery_id))
    }

    fn fail_commits_crediting<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(fail_commits_crediting(&self.store, account))
    }

    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, SqliteError>> {
        Box::pin(async move {
            let store = &self.store;
            let mut conn = store.connection().await?;
            conn.immediate_transaction(async |conn: &mut Conn| -> Result<Claim, SqliteError> {
                let claim = store.claim(conn, key).await?;
                if claim == Claim::New {
                    credit(conn, account, amount).await?;
                }
                Ok(claim)
            })
            .await
        })
    }
}

/// Makes the commit of every transaction that writes `account`'s ledger row fail:
/// a trigger adds a row whose deferred foreign key has no parent, which SQLite
/// checks at `COMMIT` (the store turns `foreign_keys` on).
///
/// # Panics
/// The statements failed.
pub async fn fail_commits_crediting(store: &SqliteStore, account: &str) {
    let account = account.replace('\'', "''");
    let mut conn = store.connection().await.unwrap();
    conn.batch_execute(&format!(
        "CREATE TABLE hookbox_test_no_parent (account TEXT PRIMARY KEY); \
         CREATE TABLE hookbox_test_orphan (account TEXT REFERENCES \
           hookbox_test_no_parent (account) DEFERRABLE INITIALLY DEFERRED); \
         CREATE TRIGGER hookbox_test_fail_insert AFTER INSERT ON ledger \
           WHEN NEW.account = '{account}' \
           BEGIN INSERT INTO hookbox_test_orphan VALUES (NEW.account); END; \
         CREATE TRIGGER hookbox_test_fail_update AFTER UPDATE ON ledger \
           WHEN NEW.account = '{account}' \
           BEGIN INSERT INTO hookbox_test_orphan VALUES (NEW.account); END;"
    ))
    .await
    .unwrap();
}

/// Makes `store`'s database refuse the inbox row of `delivery_id`: a trigger that
/// raises on its insert, as a row breaking a constraint would.
pub async fn refuse_inbox_row(store: &SqliteStore, delivery_id: &str) {
    let id = delivery_id.replace('\'', "''");
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query(format!(
        "CREATE TRIGGER hookbox_test_refuse BEFORE INSERT ON hookbox_inbox \
         WHEN NEW.delivery_id = '{id}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
}
