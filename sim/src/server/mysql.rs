//! The MySQL and MariaDB backend: a database per handler and crash design (MySQL's
//! schemas are its databases), the script's tables in InnoDB, hookbox's
//! [`MysqlStore`] on a URL naming that database.

use std::io;

use hookbox_diesel_mysql::diesel::{self, QueryableByName, sql_types::Text};
use hookbox_diesel_mysql::diesel_async::{
    AsyncMysqlConnection, RunQueryDsl as _, SimpleAsyncConnection as _,
};
use hookbox_diesel_mysql::{
    MysqlError, MysqlOptions, MysqlStore, PooledConnection, url_with_database,
};

use super::backend::{Backend, sim_conn};
use crate::error::failed;
use crate::seed::N_ACCOUNTS;

/// The script's `freshDb` tables in MySQL types: a key has a bounded length
/// (`VARCHAR`), and every table is InnoDB (row locks, transactions). Written with the
/// database's name in front, so one connection to the URL's database creates them.
const TABLES: [&str; 3] = [
    "CREATE TABLE `{db}`.accounts (id INTEGER PRIMARY KEY, credits BIGINT NOT NULL DEFAULT 0, \
     plan TEXT, plan_version BIGINT NOT NULL DEFAULT 0, plan_created BIGINT NOT NULL DEFAULT 0) \
     ENGINE = InnoDB",
    "CREATE TABLE `{db}`.processed_events (event_id VARCHAR(255) PRIMARY KEY) ENGINE = InnoDB",
    "CREATE TABLE `{db}`.applied (event_id VARCHAR(255) NOT NULL) ENGINE = InnoDB",
];

/// MySQL 8.0 and later, MariaDB 10.6 and later.
pub(super) struct Mysql;

impl Backend for Mysql {
    const NAME: &'static str = "MySQL";
    const NAMESPACES: &'static str = "databases";
    const TAG: &'static str = "mysql";

    type Conn = AsyncMysqlConnection;
    type Store = MysqlStore;
    type Error = MysqlError;
    type Pooled = PooledConnection;

    async fn store(url: &str, name: &str, connections: usize) -> io::Result<MysqlStore> {
        let url = url_with_database(url, name).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("not a URL: {url:?}"))
        })?;
        connect(&url, connections).await
    }

    async fn connection(store: &MysqlStore) -> io::Result<PooledConnection> {
        store
            .connection()
            .await
            .map_err(|e| failed("taking a connection", &e))
    }

    async fn create(url: &str, name: &str) -> io::Result<()> {
        let store = connect(url, 1).await?;
        let mut conn = Mysql::connection(&store).await?;
        conn.batch_execute(&format!("CREATE DATABASE `{name}`"))
            .await
            .map_err(|e| failed("creating the database", &e))?;
        let accounts: Vec<String> = (0..N_ACCOUNTS).map(|id| format!("({id})")).collect();
        let inserts = format!(
            "INSERT INTO `{name}`.accounts (id) VALUES {}",
            accounts.join(", ")
        );
        for sql in TABLES
            .iter()
            .map(|t| t.replace("{db}", name))
            .chain([inserts])
        {
            conn.batch_execute(&sql)
                .await
                .map_err(|e| failed("creating the sim's tables", &e))?;
        }
        Ok(())
    }

    async fn drop(url: &str, name: &str) -> io::Result<()> {
        let store = connect(url, 1).await?;
        Mysql::connection(&store)
            .await?
            .batch_execute(&format!("DROP DATABASE IF EXISTS `{name}`"))
            .await
            .map_err(|e| failed(&format!("dropping database {name}"), &e))
    }

    async fn migrate(store: &MysqlStore) -> io::Result<()> {
        store
            .migrate()
            .await
            .map(drop)
            .map_err(|e| failed("migrating the hookbox tables", &e))
    }

    async fn server_version(url: &str) -> io::Result<String> {
        #[derive(QueryableByName)]
        struct V {
            #[diesel(sql_type = Text)]
            version: String,
        }
        let store = connect(url, 1).await?;
        diesel::sql_query("SELECT VERSION() AS version")
            .get_result::<V>(&mut *Mysql::connection(&store).await?)
            .await
            .map(|v| v.version)
            .map_err(|e| failed("reading the server version", &e))
    }
}

/// A store on `url` (through the store, so TLS follows the URL's `ssl-mode`).
async fn connect(url: &str, connections: usize) -> io::Result<MysqlStore> {
    MysqlStore::connect(url, MysqlOptions::new().with_max_connections(connections))
        .await
        .map_err(|e| failed("connecting to mysql", &e))
}

// SUM of a BIGINT is DECIMAL in MySQL: cast back
sim_conn!(
    AsyncMysqlConnection,
    "SELECT CAST(SUM(credits) AS SIGNED) AS s FROM accounts"
);
