//! Shared test setup: the skip/require rule, a fresh schema per test, the ledger,
//! and the conformance harness.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::time::Duration;

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use hookbox_core::BoxFuture;
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, diesel, diesel_async};

mod harness;
// the conformance suite's binary only
#[allow(unused_imports)]
pub use harness::PgHarness;

pub use hookbox_diesel_pg::testing::{URL_VAR, pg_url};

/// A fresh schema name.
pub fn schema_name() -> String {
    format!("hb_{:016x}", fastrand::u64(..))
}

/// Creates `schema` with the hookbox tables (through `migrate`) and the ledger tables.
pub async fn create_schema(url: &str, schema: &str) {
    let mut conn = AsyncPgConnection::establish(url).await.unwrap();
    conn.batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await
        .unwrap();
    conn.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".ledger (account TEXT PRIMARY KEY, \
           balance BIGINT NOT NULL DEFAULT 0, plan TEXT); \
         CREATE TABLE \"{schema}\".applications (event TEXT NOT NULL, \
           at TIMESTAMPTZ NOT NULL DEFAULT now())"
    ))
    .await
    .unwrap();
}

/// Drops `schema` and everything in it, from a thread of its own (called from `Drop`).
pub fn drop_schema(url: &str, schema: &str) {
    let (url, schema) = (url.to_string(), schema.to_string());
    let _ = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            if let Ok(mut conn) = AsyncPgConnection::establish(&url).await {
                let _ = conn
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await;
            }
        });
    })
    .join();
}

/// A store over `schema`, migrated.
pub async fn store(url: &str, schema: &str, options: PgOptions) -> PgStore {
    let store = PgStore::connect(url, options.with_schema(schema))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

/// A migrated store on a fresh schema of its own; the store's pool closes before the
/// schema is dropped (fields drop in order).
pub struct Fixture {
    pub store: PgStore,
    pub schema: TestSchema,
}

/// A [`Fixture`] with `options`, or `None` when the test must skip (see [`pg_url`]).
pub async fn fixture(options: PgOptions) -> Option<Fixture> {
    let url = pg_url().await?;
    let schema = TestSchema::new(&url).await;
    let store = store(&url, &schema.name, options).await;
    Some(Fixture { store, schema })
}

/// A schema that drops itself at the end of the test (pass or fail).
pub struct TestSchema {
    pub url: String,
    pub name: String,
}

impl TestSchema {
    pub async fn new(url: &str) -> Self {
        let name = schema_name();
        create_schema(url, &name).await;
        Self {
            url: url.to_string(),
            name,
        }
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if std::env::var("HOOKBOX_KEEP_SCHEMAS").is_err() {
            drop_schema(&self.url, &self.name);
        }
    }
}

/// The side effect: adds `amount` to `account`, creating it at zero first.
pub fn credit<'c>(
    conn: &'c mut AsyncPgConnection,
    account: &'c str,
    amount: i64,
) -> BoxFuture<'c, Result<(), PgError>> {
    Box::pin(async move {
        diesel::sql_query(
            "INSERT INTO ledger (account, balance) VALUES ($1, $2) \
             ON CONFLICT (account) DO UPDATE SET balance = ledger.balance + EXCLUDED.balance",
        )
        .bind::<Text, _>(account)
        .bind::<BigInt, _>(amount)
        .execute(conn)
        .await?;
        Ok(())
    })
}

/// The side effect of the race tests: records that `event` was applied and credits
/// its amount, both in the caller's transaction.
pub fn apply<'c>(
    conn: &'c mut AsyncPgConnection,
    event: &'c str,
    account: &'c str,
    amount: i64,
) -> BoxFuture<'c, Result<(), PgError>> {
    Box::pin(async move {
        diesel::sql_query("INSERT INTO applications (event) VALUES ($1)")
            .bind::<Text, _>(event)
            .execute(conn)
            .await?;
        credit(conn, account, amount).await
    })
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Runs a `SELECT … AS n` returning one BIGINT.
pub async fn count(store: &PgStore, sql: &str) -> i64 {
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query(sql)
        .get_result::<Count>(&mut *conn)
        .await
        .unwrap()
        .n
}

/// Runs statements on a pooled connection.
pub async fn exec(store: &PgStore, sql: &str) {
    let mut conn = store.connection().await.unwrap();
    conn.batch_execute(sql).await.unwrap();
}

/// What the race tests check at the end.
#[derive(Debug, PartialEq, Eq)]
pub struct Tally {
    /// Rows in `applications`.
    pub applications: i64,
    /// Distinct events in `applications`.
    pub distinct: i64,
    /// The sum of all balances.
    pub ledger: i64,
}

pub async fn tally(store: &PgStore) -> Tally {
    Tally {
        applications: count(store, "SELECT count(*) AS n FROM applications").await,
        distinct: count(store, "SELECT count(DISTINCT event) AS n FROM applications").await,
        ledger: count(
            store,
            "SELECT coalesce(sum(balance), 0)::BIGINT AS n FROM ledger",
        )
        .await,
    }
}

/// The amount event `i` credits: distinct per event, so a double apply or a loss
/// shows in the total.
pub fn amount(i: usize) -> i64 {
    i as i64 + 1
}

/// The account event `i` credits (ten accounts, so transactions contend but do not
/// all queue on one row).
pub fn account(i: usize) -> String {
    format!("acct_{}", i % 10)
}

/// The expected ledger total for events `0..n`.
pub fn expected_total(n: usize) -> i64 {
    (0..n).map(amount).sum()
}

/// Long enough for any wait in these tests, short enough that a hang fails.
pub const PATIENCE: Duration = Duration::from_secs(120);
