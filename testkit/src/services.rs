//! The services a test may need besides the receiver: Redis ([`redis_url`]), a
//! PostgreSQL schema of its own ([`PgSchema`]) and a MySQL database of its own
//! ([`MysqlDatabase`]), with the skip-or-require rule for when they are missing.

use hookbox_diesel_mysql::diesel_async::AsyncMysqlConnection;
use hookbox_diesel_mysql::url_with_database;
use hookbox_diesel_pg::diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};

/// Returns `true` when a test must fail rather than skip without a service
/// (`HOOKBOX_REQUIRE_SERVICES=1`, as in CI).
fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Skips (prints `skipped: …` and returns `None`) or, when services are required,
/// panics.
#[allow(clippy::print_stdout)] // the skip rule: the test says why it did not run
pub(crate) fn skip<T>(why: &str) -> Option<T> {
    assert!(!services_required(), "{why} and HOOKBOX_REQUIRE_SERVICES=1");
    println!("skipped: {why}");
    None
}

/// Returns the URL in `var` and a connection to it, or `None` after [`skip`] when
/// `var` is unset or the server does not answer.
async fn connect_to<C: AsyncConnection>(var: &str) -> Option<(String, C)> {
    let Some(url) = std::env::var(var).ok().filter(|url| !url.is_empty()) else {
        return skip(&format!("{var} not set"));
    };
    match C::establish(&url).await {
        Ok(conn) => Some((url, conn)),
        Err(err) => skip(&format!("{var} unreachable: {err}")),
    }
}

/// Runs `statement` (a `DROP`) on a new connection to `url`, ignoring failures, from
/// a `Drop` impl: on a runtime of its own on a thread of its own, since `drop`
/// cannot await and may run inside the test's runtime.
fn run_while_dropping<C: AsyncConnection + SimpleAsyncConnection + 'static>(
    url: String,
    statement: String,
) {
    let _ = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async {
            if let Ok(mut conn) = C::establish(&url).await {
                let _ = conn.batch_execute(&statement).await;
            }
        });
    })
    .join();
}

/// Returns `HOOKBOX_REDIS_URL` when a Redis server answers there.
///
/// Returns `None` after printing `skipped: …` when it is unset or nothing listens,
/// unless `HOOKBOX_REQUIRE_SERVICES=1`.
///
/// # Panics
/// When the service is missing and `HOOKBOX_REQUIRE_SERVICES=1`.
pub fn redis_url() -> Option<String> {
    let Some(url) = std::env::var("HOOKBOX_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        return skip("HOOKBOX_REDIS_URL not set");
    };
    // host:port between the scheme (and any credentials) and the database number
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let addr = rest.split(['/', '?']).next().unwrap_or_default();
    let addr = if addr.contains(':') {
        addr.to_owned()
    } else {
        format!("{addr}:6379")
    };
    match std::net::TcpStream::connect(&addr) {
        Ok(_) => Some(url),
        Err(err) => skip(&format!("HOOKBOX_REDIS_URL unreachable: {err}")),
    }
}

/// A PostgreSQL schema of its own for one test, on the server at `HOOKBOX_PG_URL`;
/// dropped with everything in it when the value is dropped.
#[derive(Debug)]
pub struct PgSchema {
    base: String,
    name: String,
}

impl PgSchema {
    /// Creates a fresh schema.
    ///
    /// Returns `None` after printing `skipped: …` when `HOOKBOX_PG_URL` is unset or the
    /// server unreachable, unless `HOOKBOX_REQUIRE_SERVICES=1`.
    ///
    /// # Panics
    /// When the service is missing and `HOOKBOX_REQUIRE_SERVICES=1`, or the schema
    /// cannot be created.
    pub async fn create() -> Option<Self> {
        let (base, mut conn) = connect_to::<AsyncPgConnection>("HOOKBOX_PG_URL").await?;
        let name = format!("hb_example_{:016x}", fastrand::u64(..));
        conn.batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap_or_else(|err| panic!("CREATE SCHEMA {name}: {err}"));
        Some(Self { base, name })
    }

    /// Returns a URL whose connections work in this schema (its `search_path`), for
    /// `HOOKBOX_STORE`.
    pub fn url(&self) -> String {
        let separator = if self.base.contains('?') { '&' } else { '?' };
        format!(
            "{}{separator}options=-csearch_path%3D{}",
            self.base, self.name
        )
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        run_while_dropping::<AsyncPgConnection>(
            self.base.clone(),
            format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
        );
    }
}

/// A MySQL (or MariaDB) database of its own for one test, on the server at
/// `HOOKBOX_MYSQL_URL` (or another server, [`MysqlDatabase::create_on`]); dropped with
/// everything in it when the value is dropped.
#[derive(Debug)]
pub struct MysqlDatabase {
    base: String,
    name: String,
}

impl MysqlDatabase {
    /// Creates a fresh database on the server at `HOOKBOX_MYSQL_URL`.
    ///
    /// Returns `None` after printing `skipped: …` when `HOOKBOX_MYSQL_URL` is unset or
    /// the server unreachable, unless `HOOKBOX_REQUIRE_SERVICES=1`.
    ///
    /// # Panics
    /// When the service is missing and `HOOKBOX_REQUIRE_SERVICES=1`, or the database
    /// cannot be created.
    pub async fn create() -> Option<Self> {
        let (base, mut conn) = connect_to::<AsyncMysqlConnection>("HOOKBOX_MYSQL_URL").await?;
        Some(Self::create_with(&mut conn, base).await)
    }

    /// Creates a fresh database on the server `server_url` names (any database of
    /// it: the URL's database is only where the connection that creates and drops
    /// this one starts), for example a
    /// [`PrivateServer`](crate::mysql_server::PrivateServer)'s.
    ///
    /// # Panics
    /// When the server cannot be reached or the database cannot be created.
    pub async fn create_on(server_url: &str) -> Self {
        let mut conn = AsyncMysqlConnection::establish(server_url)
            .await
            .unwrap_or_else(|err| panic!("cannot connect to {server_url}: {err}"));
        Self::create_with(&mut conn, server_url.to_owned()).await
    }

    async fn create_with(conn: &mut AsyncMysqlConnection, base: String) -> Self {
        let name = format!("hb_example_{:016x}", fastrand::u64(..));
        conn.batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|err| panic!("CREATE DATABASE {name}: {err}"));
        Self { base, name }
    }

    /// Returns the database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the server's URL with this database as its path (the query, such as
    /// `ssl-mode`, kept), for `HOOKBOX_STORE`.
    pub fn url(&self) -> String {
        url_with_database(&self.base, &self.name).expect("HOOKBOX_MYSQL_URL is a mysql:// URL")
    }
}

impl Drop for MysqlDatabase {
    fn drop(&mut self) {
        run_while_dropping::<AsyncMysqlConnection>(
            self.base.clone(),
            format!("DROP DATABASE IF EXISTS {}", self.name),
        );
    }
}
