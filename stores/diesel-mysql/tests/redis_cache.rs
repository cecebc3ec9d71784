//! The conformance suite of `hookbox-core` over `Cached<MysqlStore>`: the Redis
//! cache in front of MySQL or MariaDB keeps every guarantee of the store, one fresh
//! database per check. The cache is the shared Redis of `HOOKBOX_REDIS_URL`; without
//! that variable the suite runs against an unreachable Redis instead (every lookup
//! falls through to the database), as `hookbox-redis-cache`'s own suite does.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

mod common;

use std::time::Duration;

use common::TestDatabase;
use hookbox_core::testing::{Capabilities, Harness, Rotation, SuiteConfig};
use hookbox_core::{BoxFuture, Claim, DedupeKey};
use hookbox_diesel_mysql::diesel_async::AsyncMysqlConnection;
use hookbox_diesel_mysql::{MysqlError, MysqlStore};
use hookbox_redis_cache::redis::aio::ConnectionManager;
use hookbox_redis_cache::{CacheOptions, Cached};

/// A Redis address where nothing listens: every lookup fails at once.
const DEAD_REDIS: &str = "redis://127.0.0.1:1/";

/// The shared Redis of `HOOKBOX_REDIS_URL`, or an unreachable one without it. Set
/// but not answering is a skip, or a failure under `HOOKBOX_REQUIRE_SERVICES=1`.
async fn redis() -> Option<ConnectionManager> {
    let Some(url) = std::env::var("HOOKBOX_REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        return Some(hookbox_redis_cache::connect(DEAD_REDIS).unwrap());
    };
    let redis = hookbox_redis_cache::connect(&url).unwrap();
    let mut conn = redis.clone();
    let answers = tokio::time::timeout(
        Duration::from_secs(1),
        hookbox_redis_cache::redis::cmd("PING").query_async::<String>(&mut conn),
    )
    .await
    .is_ok_and(|pong| pong.is_ok());
    if answers {
        return Some(redis);
    }
    let required = std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    assert!(!required, "HOOKBOX_REDIS_URL ({url}) does not answer");
    println!("skipped: HOOKBOX_REDIS_URL ({url}) does not answer");
    None
}

/// The conformance harness: `Cached<MysqlStore>` on a database of its own.
pub struct CachedMysqlHarness {
    store: Cached<MysqlStore>,
    // dropped after the store's pool: drops the database
    _database: TestDatabase,
}

impl Harness for CachedMysqlHarness {
    type Conn = AsyncMysqlConnection;
    type Error = MysqlError;
    type Store = Cached<MysqlStore>;

    // what the store underneath can do: the cache adds nothing and takes nothing
    const CAPABILITIES: Capabilities = common::MysqlHarness::CAPABILITIES;

    fn available() -> BoxFuture<'static, bool> {
        Box::pin(async { common::mysql_url().await.is_some() && redis().await.is_some() })
    }

    fn rotation() -> Option<Rotation> {
        common::MysqlHarness::rotation()
    }

    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self> {
        Box::pin(async move {
            // `available` found the server first
            let url = std::env::var(common::URL_VAR).expect("checked by `available`");
            let database = TestDatabase::new(&url).await;
            let inner = common::store(&database, common::options(&config)).await;
            // as long as the retention allows, and short, so a check's keys leave the
            // shared Redis soon after the run
            let keep = config
                .retention
                .rules()
                .map(|(_, keep)| keep)
                .fold(hookbox_core::DEFAULT_KEEP, Duration::min);
            let options = CacheOptions::default()
                .with_ttl(keep.min(Duration::from_secs(600)))
                .with_prefix(format!("hookbox-test:{}:", database.name));
            let redis = redis().await.expect("checked by `available`");
            let store = Cached::new(inner, redis, options).expect("valid cache options");
            Self {
                store,
                _database: database,
            }
        })
    }

    fn store(&self) -> &Cached<MysqlStore> {
        &self.store
    }

    fn credit<'c>(
        conn: &'c mut AsyncMysqlConnection,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), MysqlError>> {
        common::credit(conn, account, amount)
    }

    fn set_plan<'c>(
        conn: &'c mut AsyncMysqlConnection,
        account: &'c str,
        plan: &'c str,
    ) -> BoxFuture<'c, Result<(), MysqlError>> {
        common::set_plan(conn, account, plan)
    }

    fn balance<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<i64, MysqlError>> {
        common::balance(self.store.inner(), account)
    }

    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, MysqlError>> {
        common::plan(self.store.inner(), account)
    }

    fn refuse_inbox_row<'a>(&'a self, delivery_id: &'a str) -> BoxFuture<'a, ()> {
        common::refuse_inbox_row(self.store.inner(), delivery_id)
    }

    fn fail_commits_crediting<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        common::fail_commits_crediting(self.store.inner(), account)
    }

    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, MysqlError>> {
        // the claim goes through the cache wrapper, as a user's would
        common::claim_in_own_transaction(self.store.inner(), &self.store, key, account, amount)
    }
}

hookbox_core::conformance_tests!(CachedMysqlHarness);
