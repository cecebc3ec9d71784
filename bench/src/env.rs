//! Settings from the environment, and the per-run names and directories built from
//! them.

use std::path::PathBuf;
use std::time::Duration;

/// The variable naming the Postgres server.
pub const PG_URL_VAR: &str = "HOOKBOX_PG_URL";
/// The server used when [`PG_URL_VAR`] is unset.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The variable naming the MySQL or MariaDB server the MySQL rows use.
pub const MYSQL_URL_VAR: &str = "HOOKBOX_MYSQL_URL";
/// The server used when [`MYSQL_URL_VAR`] is unset.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";
/// The variable naming the Redis server.
pub const REDIS_URL_VAR: &str = "HOOKBOX_REDIS_URL";
/// The server used when [`REDIS_URL_VAR`] is unset.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// The value of `var`, or `default` when it is unset or empty.
pub fn var_or(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// `var` as a number of milliseconds, or `default` ms when it is unset, not a
/// number or zero.
pub fn millis(var: &str, default: u64) -> Duration {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(Duration::from_millis(default), Duration::from_millis)
}

/// `true` when `HOOKBOX_REQUIRE_SERVICES=1`: an unreachable service fails the run
/// instead of skipping its rows.
pub fn services_required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// `<pid>_<nanoseconds>`: a name no other run uses at the same time.
pub fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}_{nanos:09}", std::process::id())
}

/// A directory removed, with what it holds, when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `<HOOKBOX_BENCH_DIR or the temp dir>/<prefix><unique suffix>`.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn new(prefix: &str) -> std::io::Result<Self> {
        let base =
            std::env::var_os("HOOKBOX_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
        let dir = base.join(format!("{prefix}{}", unique_suffix()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
