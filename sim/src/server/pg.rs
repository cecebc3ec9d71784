//! The Postgres backend: a schema per handler and crash design, the script's tables
//! in Postgres types, hookbox's [`PgStore`] on that schema.

use std::io;

use hookbox_diesel_pg::diesel::{self, QueryableByName, sql_types::Text};
use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _, SimpleAsyncConnection as _,
};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore, PooledConnection};

use super::backend::{Backend, sim_conn};
use crate::error::failed;
use crate::seed::N_ACCOUNTS;

/// The script's `freshDb` tables, in Postgres types (`BIGINT` where SQLite's
/// `INTEGER` holds 64 bits).
const TABLES: &str = "
    CREATE TABLE accounts (id INTEGER PRIMARY KEY, credits BIGINT NOT NULL DEFAULT 0,
      plan TEXT, plan_version BIGINT NOT NULL DEFAULT 0, plan_created BIGINT NOT NULL DEFAULT 0);
    CREATE TABLE processed_events (event_id TEXT PRIMARY KEY);
    CREATE TABLE applied (event_id TEXT NOT NULL);";

/// PostgreSQL.
pub(super) struct Postgres;

impl Backend for Postgres {
    const NAME: &'static str = "Postgres";
    const NAMESPACES: &'static str = "schemas";
    const TAG: &'static str = "pg";

    type Conn = AsyncPgConnection;
    type Store = PgStore;
    type Error = PgError;
    type Pooled = PooledConnection;

    async fn store(url: &str, name: &str, connections: usize) -> io::Result<PgStore> {
        let options = PgOptions::new()
            .with_schema(name)
            .with_max_connections(connections);
        PgStore::connect(url, options)
            .await
            .map_err(|e| failed("connecting to postgres", &e))
    }

    async fn connection(store: &PgStore) -> io::Result<PooledConnection> {
        store
            .connection()
            .await
            .map_err(|e| failed("taking a connection", &e))
    }

    async fn create(url: &str, name: &str) -> io::Result<()> {
        let mut conn = establish(url).await?;
        conn.batch_execute(&format!("CREATE SCHEMA \"{name}\""))
            .await
            .map_err(|e| failed("creating the schema", &e))?;
        conn.batch_execute(&format!(
            "SET search_path TO \"{name}\"; {TABLES}
             INSERT INTO accounts (id) SELECT generate_series(0, {});",
            N_ACCOUNTS - 1
        ))
        .await
        .map_err(|e| failed("creating the sim's tables", &e))
    }

    async fn drop(url: &str, name: &str) -> io::Result<()> {
        establish(url)
            .await?
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
            .await
            .map_err(|e| failed(&format!("dropping schema {name}"), &e))
    }

    async fn migrate(store: &PgStore) -> io::Result<()> {
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
            server_version: String,
        }
        diesel::sql_query("SHOW server_version")
            .get_result::<V>(&mut establish(url).await?)
            .await
            .map(|v| v.server_version)
            .map_err(|e| failed("reading the server version", &e))
    }
}

async fn establish(url: &str) -> io::Result<AsyncPgConnection> {
    AsyncPgConnection::establish(url)
        .await
        .map_err(|e| failed("connecting to postgres", &e))
}

// sum(bigint) is numeric in Postgres: cast back
sim_conn!(
    AsyncPgConnection,
    "SELECT sum(credits)::BIGINT AS s FROM accounts"
);
