//! Shared test setup: a SQLite file per test with a ledger (from
//! `hookbox_sqlite::testing`), the Redis to cache in (the shared one from
//! `HOOKBOX_REDIS_URL`, a private `redis-server` child, or none at all), and the
//! conformance harness.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use diesel_async::RunQueryDsl as _;
use hookbox_core::testing::{Capabilities, Harness, Rotation, SuiteConfig};
use hookbox_core::{BoxFuture, Claim, DedupeKey, IdempotencyStore, RetentionPolicy};
use hookbox_redis_cache::redis::aio::ConnectionManager;
use hookbox_redis_cache::{CacheOptions, Cached};
// not every test binary uses every one
use hookbox_sqlite::testing::{SqliteHarness, plan, set_plan};
#[allow(unused_imports)]
pub use hookbox_sqlite::testing::{TempDir, balance, credit, open as open_sqlite, total};
use hookbox_sqlite::{Conn, ImmediateTransaction as _, SqliteError, SqliteOptions, SqliteStore};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A Redis address where nothing listens: every lookup fails at once.
pub const DEAD_REDIS: &str = "redis://127.0.0.1:1/";

/// `true` when `HOOKBOX_REQUIRE_SERVICES=1`: a missing service fails the test.
pub fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Skips (prints and returns `None`) or, when services are required, panics.
pub fn skip<T>(why: &str) -> Option<T> {
    assert!(!services_required(), "HOOKBOX_REQUIRE_SERVICES=1 but {why}");
    eprintln!("skipped: {why}");
    None
}

/// The shared Redis from `HOOKBOX_REDIS_URL`, if set and answering.
pub async fn shared_redis() -> Option<ConnectionManager> {
    let Ok(url) = std::env::var("HOOKBOX_REDIS_URL") else {
        return skip("HOOKBOX_REDIS_URL is not set");
    };
    let redis = hookbox_redis_cache::connect(&url).unwrap();
    if ping(&redis).await {
        Some(redis)
    } else {
        skip(&format!(
            "the redis at HOOKBOX_REDIS_URL ({url}) does not answer"
        ))
    }
}

/// `true` when `redis` answers PING within a second.
pub async fn ping(redis: &ConnectionManager) -> bool {
    let mut conn = redis.clone();
    matches!(
        tokio::time::timeout(
            Duration::from_secs(1),
            hookbox_redis_cache::redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await,
        Ok(Ok(_))
    )
}

/// A prefix no other test, run or process shares.
pub fn unique_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "hookbox-test:{}-{}-{:x}:",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        fastrand::u64(..)
    )
}

/// Whether `key` exists, asked with a generous timeout (a test's own check, not the
/// cache's).
pub async fn exists(redis: &ConnectionManager, key: &str) -> bool {
    let mut conn = redis.clone();
    let mut cmd = hookbox_redis_cache::redis::cmd("EXISTS");
    cmd.arg(key);
    tokio::time::timeout(Duration::from_secs(5), cmd.query_async::<u64>(&mut conn))
        .await
        .expect("redis answered within 5 s")
        .expect("EXISTS succeeded")
        > 0
}

/// The remaining TTL of `key` in milliseconds (`-2` absent, `-1` no TTL).
pub async fn pttl(redis: &ConnectionManager, key: &str) -> i64 {
    let mut conn = redis.clone();
    let mut cmd = hookbox_redis_cache::redis::cmd("PTTL");
    cmd.arg(key);
    tokio::time::timeout(Duration::from_secs(5), cmd.query_async::<i64>(&mut conn))
        .await
        .expect("redis answered within 5 s")
        .expect("PTTL succeeded")
}

/// Waits until `check` holds, polling; panics after `limit` (a bound on a wait for
/// an eventual state, not a speed assertion).
pub async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs one statement on a fresh connection of the store (test setup and sabotage).
pub async fn execute(store: &SqliteStore, sql: &str) {
    let mut conn = store.connection().await.unwrap();
    diesel::sql_query(sql).execute(&mut *conn).await.unwrap();
}

/// A cached SQLite store on a fresh file, and the file's directory.
pub struct Fixture {
    pub store: Cached<SqliteStore>,
    pub dir: TempDir,
}

impl Fixture {
    /// A fresh store with `retention`, cached in `redis` with `options` (whose prefix
    /// is replaced by a unique one).
    pub async fn new(
        redis: ConnectionManager,
        options: CacheOptions,
        retention: RetentionPolicy,
    ) -> Self {
        Self::with_sqlite(
            redis,
            options,
            SqliteOptions::default().with_retention(retention),
        )
        .await
    }

    /// A fresh store opened with `sqlite`, cached in `redis` with `options`.
    pub async fn with_sqlite(
        redis: ConnectionManager,
        options: CacheOptions,
        sqlite: SqliteOptions,
    ) -> Self {
        let dir = TempDir::new();
        let inner = open_sqlite(&dir.db(), sqlite).await;
        // the TTL ceiling is the store's own retention
        let store = Cached::new(inner, redis, options.with_prefix(unique_prefix()))
            .expect("valid cache options");
        Self { store, dir }
    }

    /// Applies `key` once with a `amount` credit to `account`, failing the test on an
    /// error.
    pub async fn credit_once(
        &self,
        key: &DedupeKey,
        account: &str,
        amount: i64,
    ) -> hookbox_core::Processed<()> {
        self.store
            .process_once(key, async |conn| Ok(credit(conn, account, amount).await?))
            .await
            .unwrap()
    }
}

/// Which Redis the conformance harness caches in.
pub trait RedisChoice: Send + Sync + 'static {
    /// Returns the connection manager, or `None` to use an unreachable one.
    fn redis() -> BoxFuture<'static, ConnectionManager>;
}

/// The shared Redis of `HOOKBOX_REDIS_URL`; without one (and without
/// `HOOKBOX_REQUIRE_SERVICES=1`) the suite still runs, against an unreachable Redis.
pub struct SharedRedis;

impl RedisChoice for SharedRedis {
    fn redis() -> BoxFuture<'static, ConnectionManager> {
        Box::pin(async {
            match shared_redis().await {
                Some(redis) => redis,
                None => {
                    eprintln!("running the conformance suite with an unreachable redis instead");
                    hookbox_redis_cache::connect(DEAD_REDIS).unwrap()
                }
            }
        })
    }
}

/// A Redis that refuses every connection: the whole outage path.
pub struct NoRedis;

impl RedisChoice for NoRedis {
    fn redis() -> BoxFuture<'static, ConnectionManager> {
        Box::pin(async { hookbox_redis_cache::connect(DEAD_REDIS).unwrap() })
    }
}

/// The conformance harness: `Cached<SqliteStore>` on one temp file per test.
pub struct CachedHarness<R> {
    fixture: Fixture,
    _redis: std::marker::PhantomData<R>,
}

impl<R: RedisChoice> Harness for CachedHarness<R> {
    type Conn = Conn;
    type Error = SqliteError;
    type Store = Cached<SqliteStore>;

    // what the store underneath can do: the cache adds nothing and takes nothing
    const CAPABILITIES: Capabilities = SqliteHarness::CAPABILITIES;

    fn rotation() -> Option<Rotation> {
        SqliteHarness::rotation()
    }

    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self> {
        Box::pin(async move {
            // as long as the retention allows, and short, so a test's keys leave the
            // shared Redis soon after the run
            let keep = config
                .retention
                .rules()
                .map(|(_, keep)| keep)
                .fold(hookbox_core::DEFAULT_KEEP, Duration::min);
            let ttl = keep.min(Duration::from_secs(600));
            let sqlite = SqliteHarness::options(config);
            let options = CacheOptions::default().with_ttl(ttl);
            let fixture = Fixture::with_sqlite(R::redis().await, options, sqlite).await;
            Self {
                fixture,
                _redis: std::marker::PhantomData,
            }
        })
    }

    fn store(&self) -> &Cached<SqliteStore> {
        &self.fixture.store
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
        Box::pin(balance(self.fixture.store.inner(), account))
    }

    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, SqliteError>> {
        Box::pin(plan(self.fixture.store.inner(), account))
    }

    fn refuse_inbox_row<'a>(&'a self, delivery_id: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(hookbox_sqlite::testing::refuse_inbox_row(
            self.fixture.store.inner(),
            delivery_id,
        ))
    }

    fn fail_commits_crediting<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(hookbox_sqlite::testing::fail_commits_crediting(
            self.fixture.store.inner(),
            account,
        ))
    }

    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, SqliteError>> {
        Box::pin(async move {
            let store = &self.fixture.store;
            let mut conn = store.inner().connection().await?;
            conn.immediate_transaction(async |conn: &mut Conn| -> Result<Claim, SqliteError> {
                // the claim goes through the cache wrapper, as a user's would
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

/// A private `redis-server` on a random port, killed when dropped (also on panic).
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

impl RedisServer {
    /// Starts one, or skips when the `redis-server` binary is missing.
    pub async fn start() -> Option<Self> {
        if Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            return skip("the redis-server binary is not installed");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self { child: None, port };
        server.restart().await;
        Some(server)
    }

    /// The URL to connect to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server at once (SIGKILL: no shutdown, no save).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server (again) on the same port, empty, and waits until it answers.
    pub async fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let port = self.port;
        wait_until(
            "the private redis-server answers",
            Duration::from_secs(20),
            || async move {
                raw_command(port, "PING", Duration::from_millis(500))
                    .await
                    .is_some_and(|reply| reply.starts_with("+PONG"))
            },
        )
        .await;
    }

    /// Sends one inline command on a fresh connection and returns the first reply
    /// bytes, or `None` when none came within `wait`.
    pub async fn command(&self, command: &str, wait: Duration) -> Option<String> {
        raw_command(self.port, command, wait).await
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn raw_command(port: u16, command: &str, wait: Duration) -> Option<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream
            .write_all(format!("{command}\r\n").as_bytes())
            .await
            .ok()?;
        let mut reply = vec![0u8; 256];
        let n = stream.read(&mut reply).await.ok()?;
        (n > 0).then(|| String::from_utf8_lossy(&reply[..n]).into_owned())
    };
    tokio::time::timeout(wait, exchange).await.ok().flatten()
}
