//! The servers a bench runs against: a fresh Postgres schema or MySQL database with
//! hookbox's tables, a Redis key prefix of the run's own, all removed at the end, and
//! the facts their headers print.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{
    AsyncConnection as _, AsyncMysqlConnection, AsyncPgConnection, RunQueryDsl as _,
    SimpleAsyncConnection as _,
};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore, url_with_database};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_redis_cache::redis;
use hookbox_redis_cache::redis::aio::ConnectionManager;

use crate::BoxErr;
use crate::env::{services_required, unique_suffix};

/// `scheme://user:secret@host:port/db` as `host:port/db`, for a header.
pub fn without_credentials(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.rsplit_once('@').map_or(rest, |(_, host)| host)
}

/// The header's line for a service that could not be set up: `unreachable (…); the
/// <service> rows are skipped, set <var>`.
///
/// # Errors
/// With `HOOKBOX_REQUIRE_SERVICES=1` a service that cannot be set up fails the run
/// instead.
pub fn skipped(service: &str, url: &str, var: &str, err: &BoxErr) -> Result<String, BoxErr> {
    if services_required() {
        let url = without_credentials(url);
        return Err(format!("{service} at {url} unreachable: {err}").into());
    }
    Ok(format!(
        "unreachable ({err}); the {service} rows are skipped, set {var}"
    ))
}

/// A schema of this run's own on a Postgres server, with hookbox's tables.
#[derive(Debug, Clone)]
pub struct PgSchema {
    /// The server.
    pub url: String,
    /// The schema, `<prefix><unique suffix>`.
    pub name: String,
}

impl PgSchema {
    /// Connects to `url` (within 5 s), reads the server's `settings` for the header
    /// (`name=value` each), creates the schema `<prefix><unique suffix>` and migrates
    /// hookbox's tables into it. Also returns the connection, for more setup.
    ///
    /// # Errors
    /// The server unreachable within 5 s, or a statement failing; a schema created
    /// before the failure is dropped again.
    pub async fn create(
        url: &str,
        prefix: &str,
        settings: &[&str],
    ) -> Result<(Self, Vec<String>, AsyncPgConnection), BoxErr> {
        let mut conn =
            tokio::time::timeout(Duration::from_secs(5), AsyncPgConnection::establish(url))
                .await
                .map_err(|_| "no connection within 5 s")??;
        #[derive(QueryableByName)]
        struct Setting {
            #[diesel(sql_type = Text)]
            v: String,
        }
        let mut facts = Vec::new();
        for setting in settings {
            let row = diesel::sql_query(format!("SELECT current_setting('{setting}') AS v"))
                .get_result::<Setting>(&mut conn)
                .await?;
            facts.push(format!("{setting}={}", row.v));
        }
        let schema = Self {
            url: url.to_string(),
            name: format!("{prefix}{}", unique_suffix()),
        };
        conn.batch_execute(&format!("CREATE SCHEMA \"{}\"", schema.name))
            .await?;
        let migrated = async {
            let store = schema
                .store(PgOptions::new().with_max_connections(1))
                .await?;
            store.migrate().await?;
            Ok::<_, BoxErr>(())
        };
        if let Err(err) = migrated.await {
            let _ = schema.drop_schema().await;
            return Err(err);
        }
        Ok((schema, facts, conn))
    }

    /// A store on the schema, with `options` otherwise.
    ///
    /// # Errors
    /// The store cannot connect.
    pub async fn store(&self, options: PgOptions) -> Result<PgStore, BoxErr> {
        Ok(PgStore::connect(&self.url, options.with_schema(&self.name)).await?)
    }

    /// Drops the schema with everything in it.
    ///
    /// # Errors
    /// The server unreachable, or the statement failing.
    pub async fn drop_schema(&self) -> Result<(), BoxErr> {
        let mut conn = AsyncPgConnection::establish(&self.url).await?;
        conn.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name))
            .await?;
        Ok(())
    }
}

/// A database of this run's own on a MySQL or MariaDB server, with hookbox's tables.
#[derive(Debug, Clone)]
pub struct MysqlDatabase {
    /// The server's URL as given (naming some other database).
    pub server: String,
    /// The database, `<prefix><unique suffix>`.
    pub name: String,
}

impl MysqlDatabase {
    /// Connects to `url` (within 5 s), reads the server's version for the header,
    /// creates the database `<prefix><unique suffix>` and migrates hookbox's tables
    /// into it.
    ///
    /// # Errors
    /// The server unreachable within 5 s, or a statement failing; a database created
    /// before the failure is dropped again.
    pub async fn create(url: &str, prefix: &str) -> Result<(Self, String), BoxErr> {
        #[derive(QueryableByName)]
        struct Version {
            #[diesel(sql_type = Text)]
            v: String,
        }
        let mut conn =
            tokio::time::timeout(Duration::from_secs(5), AsyncMysqlConnection::establish(url))
                .await
                .map_err(|_| "no connection within 5 s")??;
        let version = diesel::sql_query("SELECT VERSION() AS v")
            .get_result::<Version>(&mut conn)
            .await?
            .v;
        let database = Self {
            server: url.to_string(),
            name: format!("{prefix}{}", unique_suffix()),
        };
        conn.batch_execute(&format!("CREATE DATABASE `{}`", database.name))
            .await?;
        let migrated = async {
            let store = database
                .store(MysqlOptions::new().with_max_connections(1))
                .await?;
            store.migrate().await?;
            Ok::<_, BoxErr>(())
        };
        if let Err(err) = migrated.await {
            let _ = database.drop_database().await;
            return Err(err);
        }
        Ok((database, format!("version={version}")))
    }

    /// The URL naming this database on the server (the server's URL with its
    /// database replaced, its query kept).
    pub fn url(&self) -> String {
        url_with_database(&self.server, &self.name)
            .expect("the MySQL server's URL is a mysql:// URL")
    }

    /// A store on the database, with `options` otherwise.
    ///
    /// # Errors
    /// The store cannot connect.
    pub async fn store(&self, options: MysqlOptions) -> Result<MysqlStore, BoxErr> {
        Ok(MysqlStore::connect(&self.url(), options).await?)
    }

    /// Drops the database with everything in it.
    ///
    /// # Errors
    /// The server unreachable, or the statement failing.
    pub async fn drop_database(&self) -> Result<(), BoxErr> {
        let mut conn = AsyncMysqlConnection::establish(&self.server).await?;
        conn.batch_execute(&format!("DROP DATABASE IF EXISTS `{}`", self.name))
            .await?;
        Ok(())
    }
}

/// A Redis server and the key prefix of this run.
pub struct Redis {
    /// The connection, shared by clones.
    pub manager: ConnectionManager,
    /// `hookbox-bench:<unique suffix>:`: every key the run writes starts with it.
    pub prefix: String,
    /// The server's address and version, for the header.
    pub facts: String,
}

impl Redis {
    /// Connects to `url` (an answer within 1 s) and reads its version.
    ///
    /// # Errors
    /// The server unreachable or not answering within 1 s.
    pub async fn connect(url: &str) -> Result<Self, BoxErr> {
        let manager = hookbox_redis_cache::connect(url)?;
        let mut conn = manager.clone();
        let info = tokio::time::timeout(
            Duration::from_secs(1),
            redis::cmd("INFO")
                .arg("server")
                .query_async::<String>(&mut conn),
        )
        .await
        .map_err(|_| "no answer within 1 s")??;
        let version = info
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .unwrap_or("unknown")
            .trim()
            .to_string();
        Ok(Self {
            manager,
            prefix: format!("hookbox-bench:{}:", unique_suffix()),
            facts: format!("{} (redis {version})", without_credentials(url)),
        })
    }

    /// Deletes every key under the run's prefix; returns how many.
    ///
    /// # Errors
    /// A command failing.
    pub async fn delete_keys(&self) -> Result<u64, BoxErr> {
        let mut conn = self.manager.clone();
        let pattern = format!("{}*", self.prefix);
        let mut cursor = 0_u64;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            if !keys.is_empty() {
                deleted += redis::cmd("DEL")
                    .arg(&keys)
                    .query_async::<u64>(&mut conn)
                    .await?;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }
}
