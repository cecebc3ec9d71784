//! The services a test may need besides the receiver: Redis ([`redis_url`]) and a
//! PostgreSQL schema of its own ([`PgSchema`]), with the skip-or-require rule for
//! when they are missing.

use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _,
};

/// Returns `true` when a test must fail rather than skip without a service
/// (`HOOKBOX_REQUIRE_SERVICES=1`, as in CI).
fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// Skips (prints `skipped: …` and returns `None`) or, when services are required,
/// panics.
#[allow(clippy::print_stdout)] // the skip rule: the test says why it did not run
fn skip<T>(why: &str) -> Option<T> {
    assert!(!services_required(), "{why} and HOOKBOX_REQUIRE_SERVICES=1");
    println!("skipped: {why}");
    None
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
        let Some(base) = std::env::var("HOOKBOX_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            return skip("HOOKBOX_PG_URL not set");
        };
        let mut conn = match AsyncPgConnection::establish(&base).await {
            Ok(conn) => conn,
            Err(err) => return skip(&format!("HOOKBOX_PG_URL unreachable: {err}")),
        };
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
        // a runtime of its own on a thread of its own: `drop` cannot await, and it may
        // run inside the test's runtime
        let (base, name) = (self.base.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(mut conn) = AsyncPgConnection::establish(&base).await {
                    let _ = conn
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}
