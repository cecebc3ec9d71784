//! Shared test setup: the skip/require rule, a fresh database per test, the ledger,
//! and the conformance harness.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use hookbox_core::{BoxFuture, GroupCommitStats};
use hookbox_diesel_mysql::{MysqlError, MysqlOptions, MysqlStore, diesel, diesel_async};

mod harness;
// the conformance suites' binaries only
#[allow(unused_imports)]
pub use harness::{
    MysqlHarness, balance, claim_in_own_transaction, fail_commits_crediting, options, plan,
    refuse_inbox_row, set_plan,
};

pub use hookbox_diesel_mysql::testing::{URL_VAR, mysql_url};
// each test binary uses a few of these
#[allow(unused_imports)]
pub use hookbox_diesel_shared::testing::{
    self, Backend, PATIENCE, Settings, Tally, account, amount, expected_total,
};

/// A fresh database name.
pub fn database_name() -> String {
    format!("hb_{:016x}", fastrand::u64(..))
}

/// `url` with its database replaced by `database` (the parameters kept).
pub fn url_for(url: &str, database: &str) -> String {
    let authority = url.find("://").map_or(0, |at| at + 3);
    let host = url[authority..]
        .find('@')
        .map_or(authority, |at| authority + at + 1);
    let path = url[host..].find('/').map(|at| host + at);
    let query = url[host..].find('?').map(|at| host + at);
    match (path, query) {
        (Some(path), Some(query)) if path < query => {
            format!("{}/{database}{}", &url[..path], &url[query..])
        }
        (Some(path), None) => format!("{}/{database}", &url[..path]),
        (_, Some(query)) => format!("{}/{database}{}", &url[..query], &url[query..]),
        (None, None) => format!("{url}/{database}"),
    }
}

/// Creates `database` with the ledger tables (the hookbox tables come from `migrate`).
pub async fn create_database(url: &str, database: &str) {
    let mut conn = AsyncMysqlConnection::establish(url).await.unwrap();
    conn.batch_execute(&format!(
        "CREATE DATABASE `{database}` CHARACTER SET utf8mb4; \
         CREATE TABLE `{database}`.ledger (account VARCHAR(255) PRIMARY KEY, \
           balance BIGINT NOT NULL DEFAULT 0, plan TEXT) ENGINE = InnoDB; \
         CREATE TABLE `{database}`.applications (event VARCHAR(255) NOT NULL, \
           at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE = InnoDB"
    ))
    .await
    .unwrap();
}

/// Drops `database` and everything in it, from a thread of its own (called from
/// `Drop`).
pub fn drop_database(url: &str, database: &str) {
    let (url, database) = (url.to_string(), database.to_string());
    let _ = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            if let Ok(mut conn) = AsyncMysqlConnection::establish(&url).await {
                let _ = conn
                    .batch_execute(&format!("DROP DATABASE IF EXISTS `{database}`"))
                    .await;
            }
        });
    })
    .join();
}

/// A store over `database`, migrated.
pub async fn store(database: &TestDatabase, options: MysqlOptions) -> MysqlStore {
    store_in(&database.server, &database.name, options).await
}

/// A store over the database `name` of the server at `server`, migrated.
pub async fn store_in(server: &str, name: &str, options: MysqlOptions) -> MysqlStore {
    let store = MysqlStore::connect(&url_for(server, name), options)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

/// A migrated store on a fresh database of its own; the store's pool closes before
/// the database is dropped (fields drop in order).
pub struct Fixture {
    pub store: MysqlStore,
    pub database: TestDatabase,
}

/// A [`Fixture`] with `options`, or `None` when the test must skip (see [`mysql_url`]).
pub async fn fixture(options: MysqlOptions) -> Option<Fixture> {
    let url = mysql_url().await?;
    let database = TestDatabase::new(&url).await;
    let store = store(&database, options).await;
    Some(Fixture { store, database })
}

/// A database that drops itself at the end of the test (pass or fail).
pub struct TestDatabase {
    /// The server's URL, as `HOOKBOX_MYSQL_URL` gives it.
    pub server: String,
    pub name: String,
}

impl TestDatabase {
    pub async fn new(server: &str) -> Self {
        let name = database_name();
        create_database(server, &name).await;
        Self {
            server: server.to_string(),
            name,
        }
    }

    /// The URL of this database.
    pub fn url(&self) -> String {
        url_for(&self.server, &self.name)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if std::env::var("HOOKBOX_KEEP_DATABASES").is_err() {
            drop_database(&self.server, &self.name);
        }
    }
}

/// The side effect: adds `amount` to `account`, creating it at zero first.
pub fn credit<'c>(
    conn: &'c mut AsyncMysqlConnection,
    account: &'c str,
    amount: i64,
) -> BoxFuture<'c, Result<(), MysqlError>> {
    Box::pin(async move {
        diesel::sql_query(
            "INSERT INTO ledger (account, balance) VALUES (?, ?) \
             ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)",
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
    conn: &'c mut AsyncMysqlConnection,
    event: &'c str,
    account: &'c str,
    amount: i64,
) -> BoxFuture<'c, Result<(), MysqlError>> {
    Box::pin(async move {
        diesel::sql_query("INSERT INTO applications (event) VALUES (?)")
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
pub async fn count(store: &MysqlStore, sql: &str) -> i64 {
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query(sql)
        .get_result::<Count>(&mut *conn)
        .await
        .unwrap()
        .n
}

/// Runs statements on a pooled connection.
pub async fn exec(store: &MysqlStore, sql: &str) {
    let mut conn = store.connection().await.unwrap();
    conn.batch_execute(sql).await.unwrap();
}

/// The ledger totals the race tests check.
pub async fn tally(store: &MysqlStore) -> Tally {
    testing::tally::<Mysql>(store).await
}

/// Kills the connections running an insert into the inbox (asleep in the test's
/// trigger, which the process list shows as the running statement); returns how
/// many.
pub async fn kill_inserts(store: &MysqlStore) -> usize {
    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        id: i64,
    }

    let mut conn = store.connection().await.unwrap();
    let running = diesel::sql_query(
        "SELECT CAST(id AS SIGNED) AS id FROM information_schema.processlist \
         WHERE db = DATABASE() AND info LIKE 'DO SLEEP%' AND id <> CONNECTION_ID()",
    )
    .load::<Id>(&mut *conn)
    .await
    .unwrap();
    for process in &running {
        // gone already when its statement ended meanwhile
        let _ = conn.batch_execute(&format!("KILL {}", process.id)).await;
    }
    running.len()
}

/// The MySQL backend of the shared checks: a fresh database per test.
pub struct Mysql;

impl Backend for Mysql {
    type Conn = AsyncMysqlConnection;
    type Store = MysqlStore;
    type Scope = TestDatabase;

    const CHILD_VAR: &'static str = "HOOKBOX_TEST_CHILD_DATABASE";
    const SUM_BALANCES: &'static str =
        "SELECT CAST(coalesce(sum(balance), 0) AS SIGNED) AS n FROM ledger";

    fn url() -> BoxFuture<'static, Option<String>> {
        Box::pin(mysql_url())
    }

    fn scope(url: &str) -> BoxFuture<'_, TestDatabase> {
        Box::pin(TestDatabase::new(url))
    }

    fn scope_name(scope: &TestDatabase) -> &str {
        &scope.name
    }

    fn store<'a>(url: &'a str, name: &'a str, settings: Settings) -> BoxFuture<'a, MysqlStore> {
        let mut options = MysqlOptions::new();
        if let Some(n) = settings.max_connections {
            options = options.with_max_connections(n);
        }
        if let Some(n) = settings.group_commit_writers {
            options = options.with_group_commit_writers(n);
        }
        Box::pin(store_in(url, name, options))
    }

    fn group_commit_writers(store: &MysqlStore) -> usize {
        store.options().group_commit_writers()
    }

    fn group_commit_stats(store: &MysqlStore) -> Option<GroupCommitStats> {
        store.group_commit_stats()
    }

    fn slow_inbox_inserts(store: &MysqlStore) -> BoxFuture<'_, ()> {
        // MySQL's triggers run per row: each row of a batch sleeps
        Box::pin(exec(
            store,
            "CREATE TRIGGER hookbox_test_slow BEFORE INSERT ON hookbox_inbox \
             FOR EACH ROW BEGIN DO SLEEP(0.5); END",
        ))
    }

    fn fast_inbox_inserts(store: &MysqlStore) -> BoxFuture<'_, ()> {
        Box::pin(exec(store, "DROP TRIGGER hookbox_test_slow"))
    }

    fn kill_inbox_inserts(store: &MysqlStore) -> BoxFuture<'_, usize> {
        Box::pin(kill_inserts(store))
    }

    fn apply<'c>(
        conn: &'c mut AsyncMysqlConnection,
        event: &'c str,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), MysqlError>> {
        apply(conn, event, account, amount)
    }

    fn count<'a>(store: &'a MysqlStore, sql: &'a str) -> BoxFuture<'a, i64> {
        Box::pin(count(store, sql))
    }

    fn exec<'a>(store: &'a MysqlStore, sql: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(exec(store, sql))
    }
}
