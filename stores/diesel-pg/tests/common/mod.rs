//! Shared test setup: the skip/require rule, a fresh schema per test, the ledger,
//! and the conformance harness.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use hookbox_core::{BoxFuture, GroupCommitStats};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, diesel, diesel_async};

mod harness;
// the conformance suite's binary only
#[allow(unused_imports)]
pub use harness::PgHarness;

pub use hookbox_diesel_pg::testing::{URL_VAR, pg_url};
// each test binary uses a few of these
#[allow(unused_imports)]
pub use hookbox_diesel_shared::testing::{
    self, Backend, PATIENCE, Settings, Tally, account, amount, expected_total,
};

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

/// The ledger totals the race tests check.
pub async fn tally(store: &PgStore) -> Tally {
    testing::tally::<Pg>(store).await
}

/// The PostgreSQL backend of the shared checks: a fresh schema per test.
pub struct Pg;

impl Backend for Pg {
    type Conn = AsyncPgConnection;
    type Store = PgStore;
    type Scope = TestSchema;

    const CHILD_VAR: &'static str = "HOOKBOX_TEST_CHILD_SCHEMA";
    const SUM_BALANCES: &'static str = "SELECT coalesce(sum(balance), 0)::BIGINT AS n FROM ledger";

    fn url() -> BoxFuture<'static, Option<String>> {
        Box::pin(pg_url())
    }

    fn scope(url: &str) -> BoxFuture<'_, TestSchema> {
        Box::pin(TestSchema::new(url))
    }

    fn scope_name(scope: &TestSchema) -> &str {
        &scope.name
    }

    fn store<'a>(url: &'a str, name: &'a str, settings: Settings) -> BoxFuture<'a, PgStore> {
        let mut options = PgOptions::new();
        if let Some(n) = settings.max_connections {
            options = options.with_max_connections(n);
        }
        if let Some(n) = settings.group_commit_writers {
            options = options.with_group_commit_writers(n);
        }
        Box::pin(store(url, name, options))
    }

    fn group_commit_writers(store: &PgStore) -> usize {
        store.options().group_commit_writers()
    }

    fn group_commit_stats(store: &PgStore) -> Option<GroupCommitStats> {
        store.group_commit_stats()
    }

    fn slow_inbox_inserts(store: &PgStore) -> BoxFuture<'_, ()> {
        Box::pin(exec(
            store,
            "CREATE FUNCTION hookbox_test_slow() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_sleep(1.0); RETURN NULL; END $$; \
             CREATE TRIGGER hookbox_test_slow BEFORE INSERT ON hookbox_inbox \
             FOR EACH STATEMENT EXECUTE FUNCTION hookbox_test_slow()",
        ))
    }

    fn fast_inbox_inserts(store: &PgStore) -> BoxFuture<'_, ()> {
        Box::pin(exec(
            store,
            "DROP TRIGGER hookbox_test_slow ON hookbox_inbox",
        ))
    }

    fn kill_inbox_inserts(store: &PgStore) -> BoxFuture<'_, usize> {
        Box::pin(async move {
            let killed = count(
                store,
                "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
                 WHERE state = 'active' AND query LIKE 'INSERT INTO hookbox_inbox%' \
                 AND pid <> pg_backend_pid()",
            )
            .await;
            usize::try_from(killed).unwrap()
        })
    }

    fn apply<'c>(
        conn: &'c mut AsyncPgConnection,
        event: &'c str,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), PgError>> {
        apply(conn, event, account, amount)
    }

    fn count<'a>(store: &'a PgStore, sql: &'a str) -> BoxFuture<'a, i64> {
        Box::pin(count(store, sql))
    }

    fn exec<'a>(store: &'a PgStore, sql: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(exec(store, sql))
    }
}
