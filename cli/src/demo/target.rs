//! Where the demo's inbox lives ([`Target`]) and the runs on each store: a SQLite
//! file (temporary, or new and kept), a fresh Postgres schema or a fresh MySQL
//! database, dropped afterwards, pass or fail.

use std::path::{Path, PathBuf};

use hookbox_cli::store::Location;
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore, url_with_database};
use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::{SqliteOptions, SqliteStore};

use super::failure::Failure;
use super::report::Report;
use super::{MYSQL_WORKERS, POSTGRES_WORKERS, SQLITE_WORKERS, Setup, run_on};
use crate::UsageError;

/// Where the demo's inbox lives.
pub(super) enum Target {
    /// A file in a temporary directory, removed when dropped.
    Temporary(TempDir),
    /// A new SQLite file the user named, kept for `hookbox inbox` to look at.
    File(PathBuf),
    /// A Postgres server: the demo runs in a fresh schema and drops it.
    Postgres(String),
    /// A MySQL or MariaDB server: the demo runs in a fresh database and drops it.
    Mysql(String),
}

impl Target {
    pub(super) fn from_arg(store: Option<&str>) -> Result<Self, UsageError> {
        let Some(store) = store else {
            return TempDir::new()
                .map(Self::Temporary)
                .map_err(|err| UsageError(format!("cannot create a temporary directory: {err}")));
        };
        let path = match Location::parse(store) {
            Location::Postgres(url) => return Ok(Self::Postgres(url.to_string())),
            Location::Mysql(url) => return Ok(Self::Mysql(url.to_string())),
            Location::Sqlite(path) => path.to_path_buf(),
        };
        if path.exists() {
            return Err(UsageError(format!(
                "--store {}: the file exists; the demo needs a new one (or leave --store out for a temporary file)",
                path.display()
            )));
        }
        Ok(Self::File(path))
    }
}

/// A directory of its own under the system's temp directory, removed when dropped.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "hookbox-demo-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self(path))
    }

    pub(super) fn db(&self) -> PathBuf {
        self.0.join("hookbox.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) async fn run_sqlite(
    path: &Path,
    label: String,
    setup: Setup,
) -> Result<Report, Failure> {
    let store = SqliteStore::open(path, SqliteOptions::default()).await?;
    store.migrate().await?;
    run_on(store, SQLITE_WORKERS, label, setup).await
}

/// Runs the demo in a fresh schema and drops it afterwards, pass or fail.
pub(super) async fn run_postgres(url: &str, setup: Setup) -> Result<Report, Failure> {
    let schema = format!("hookbox_demo_{:016x}", fastrand::u64(..));
    let mut admin = AsyncPgConnection::establish(url).await?;
    admin
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await?;
    let label = format!("Postgres (schema {schema}, dropped afterwards)");
    let outcome = async {
        let options = PgOptions::new()
            .with_schema(schema.clone())
            .with_max_connections(16);
        let store = PgStore::connect(url, options).await?;
        store.migrate().await?;
        run_on(store, POSTGRES_WORKERS, label, setup).await
    }
    .await;
    let dropped = admin
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await;
    let report = outcome?;
    dropped?;
    Ok(report)
}

/// Runs the demo in a fresh database on the URL's server and drops it afterwards,
/// pass or fail. MySQL's schemas are its databases: the store's tables live in the
/// URL's database, so the demo's URL names its own.
pub(super) async fn run_mysql(url: &str, setup: Setup) -> Result<Report, Failure> {
    let database = format!("hookbox_demo_{:016x}", fastrand::u64(..));
    let demo_url =
        url_with_database(url, &database).ok_or_else(|| format!("--store: not a URL: {url:?}"))?;
    // the admin connection through the store, so TLS follows the URL's `ssl-mode`
    let admin = MysqlStore::connect(url, MysqlOptions::new().with_max_connections(1)).await?;
    let mut conn = admin.connection().await?;
    conn.batch_execute(&format!("CREATE DATABASE `{database}`"))
        .await?;
    let label = format!("MySQL (database {database}, dropped afterwards)");
    let outcome = async {
        let options = MysqlOptions::new().with_max_connections(16);
        let store = MysqlStore::connect(&demo_url, options).await?;
        store.migrate().await?;
        run_on(store, MYSQL_WORKERS, label, setup).await
    }
    .await;
    let dropped = conn
        .batch_execute(&format!("DROP DATABASE IF EXISTS `{database}`"))
        .await;
    let report = outcome?;
    dropped?;
    Ok(report)
}
