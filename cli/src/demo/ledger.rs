//! The demo's own tables and the worker's handler: the side effect a user writes.
//!
//! The handler runs on the inbox row's transaction, so its writes commit with the
//! row's `processed_at` or not at all: credits go to `demo_accounts`, plan updates go
//! through the store's [`VersionGuard`], and every application is logged in
//! `demo_applied` (one row per time an event was applied, like the seed's `applied`
//! table), which is what the report counts.
//!
//! The SQL is written with Postgres' `$1` placeholders: SQLite reads the same numbers
//! as `?1`, and MySQL's plain `?` takes the arguments in the order the numbers appear.
//! MySQL has its own table definitions and upserts ([`Statements`]).

use std::collections::HashMap;
use std::future::Future;
use std::ops::DerefMut;

use diesel::backend::{Backend, DieselReserveSpecialization};
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, HasSqlType, Text};
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection, RunQueryDsl as _};
use hookbox_core::{
    Advance, Delivery, Handler, HandlerError, Inbox, InboxAdmin, Message, OutboxAdmin, OutboxStore,
    VersionGuard,
};
use hookbox_diesel_mysql::MysqlStore;
use hookbox_diesel_pg::{PgStore, diesel, diesel_async};
use hookbox_sqlite::SqliteStore;

use super::failure::Failure;
use super::receipts;
use super::traffic::{Change, Payload};

/// The statements that differ between databases: the tables and the two upserts.
pub(crate) struct Statements {
    create_tables: [&'static str; 2],
    credit: &'static str,
    set_plan: &'static str,
}

/// The demo's tables and upserts, valid SQL on both SQLite and Postgres.
const STANDARD: Statements = Statements {
    create_tables: [
        "CREATE TABLE demo_accounts (account TEXT PRIMARY KEY, \
         credits BIGINT NOT NULL DEFAULT 0, plan TEXT, plan_version BIGINT NOT NULL DEFAULT 0)",
        // no key on purpose: an event applied twice must show up as two rows
        "CREATE TABLE demo_applied (event_id TEXT NOT NULL, outcome TEXT NOT NULL, \
         forged BIGINT NOT NULL)",
    ],
    credit: "INSERT INTO demo_accounts (account, credits) VALUES ($1, $2) \
         ON CONFLICT (account) DO UPDATE SET credits = demo_accounts.credits + excluded.credits",
    set_plan: "INSERT INTO demo_accounts (account, plan, plan_version) \
         VALUES ($1, $2, $3) ON CONFLICT (account) \
         DO UPDATE SET plan = excluded.plan, plan_version = excluded.plan_version",
};

/// The same on MySQL and MariaDB: a key must have a bounded length (`VARCHAR`), and
/// the upserts are `ON DUPLICATE KEY UPDATE`, repeating a parameter rather than
/// `VALUES(col)` (deprecated in MySQL 8) or an `AS new` alias (not in MariaDB).
const MYSQL: Statements = Statements {
    create_tables: [
        "CREATE TABLE demo_accounts (account VARCHAR(255) PRIMARY KEY, \
         credits BIGINT NOT NULL DEFAULT 0, plan TEXT, plan_version BIGINT NOT NULL DEFAULT 0) \
         ENGINE = InnoDB",
        // no key on purpose: an event applied twice must show up as two rows
        "CREATE TABLE demo_applied (event_id VARCHAR(255) NOT NULL, outcome TEXT NOT NULL, \
         forged BIGINT NOT NULL) ENGINE = InnoDB",
    ],
    credit: "INSERT INTO demo_accounts (account, credits) VALUES ($1, $2) \
         ON DUPLICATE KEY UPDATE credits = credits + $2",
    set_plan: "INSERT INTO demo_accounts (account, plan, plan_version) VALUES ($1, $2, $3) \
         ON DUPLICATE KEY UPDATE plan = $2, plan_version = $3",
};

const LOG: &str = "INSERT INTO demo_applied (event_id, outcome, forged) VALUES ($1, $2, $3)";

/// What the handler logs for each application.
pub(crate) const CREDITED: &str = "credited";
pub(crate) const PLAN_SET: &str = "plan_set";
pub(crate) const STALE_REFUSED: &str = "stale_refused";

/// A statement parameter.
#[derive(Clone, Copy)]
pub(crate) enum Arg<'a> {
    Text(&'a str),
    Int(i64),
}

/// One `name, n` row: how every report query answers.
#[derive(diesel::QueryableByName)]
struct Pair {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Runs the demo's SQL on a store's connection, whichever database it is.
pub(crate) trait DemoConn: Send {
    /// The statements in this database's dialect.
    const SQL: &'static Statements;

    /// Runs one statement whose parameters are written `$1`, `$2`, … in order.
    fn execute<'c>(
        &'c mut self,
        sql: &'c str,
        args: &'c [Arg<'c>],
    ) -> impl Future<Output = diesel::QueryResult<usize>> + Send + 'c;

    /// Runs a query whose rows are `name TEXT, n BIGINT`.
    fn pairs<'c>(
        &'c mut self,
        sql: &'c str,
    ) -> impl Future<Output = diesel::QueryResult<Vec<(String, i64)>>> + Send + 'c;
}

/// Binds `args` to `sql` in order as one query type, whatever their number.
fn bound<'a, DB>(
    sql: String,
    args: impl IntoIterator<Item = Arg<'a>>,
) -> BoxedSqlQuery<'a, DB, SqlQuery>
where
    DB: Backend + DieselReserveSpecialization + HasSqlType<Text> + HasSqlType<BigInt>,
    &'a str: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    args.into_iter().fold(
        diesel::sql_query(sql).into_boxed(),
        |query, arg| match arg {
            Arg::Text(text) => query.bind::<Text, _>(text),
            Arg::Int(int) => query.bind::<BigInt, _>(int),
        },
    )
}

impl DemoConn for hookbox_sqlite::Conn {
    const SQL: &'static Statements = &STANDARD;

    fn execute<'c>(
        &'c mut self,
        sql: &'c str,
        args: &'c [Arg<'c>],
    ) -> impl Future<Output = diesel::QueryResult<usize>> + Send + 'c {
        // SQLite numbers its parameters `?1`, `?2`, … where Postgres writes `$1`, `$2`, …
        let query = bound::<diesel::sqlite::Sqlite>(sql.replace('$', "?"), args.iter().copied());
        query.execute(self)
    }

    async fn pairs<'c>(&'c mut self, sql: &'c str) -> diesel::QueryResult<Vec<(String, i64)>> {
        let rows: Vec<Pair> = diesel::sql_query(sql).load(self).await?;
        Ok(rows.into_iter().map(|p| (p.name, p.n)).collect())
    }
}

impl DemoConn for AsyncPgConnection {
    const SQL: &'static Statements = &STANDARD;

    fn execute<'c>(
        &'c mut self,
        sql: &'c str,
        args: &'c [Arg<'c>],
    ) -> impl Future<Output = diesel::QueryResult<usize>> + Send + 'c {
        let query = bound::<diesel::pg::Pg>(sql.to_string(), args.iter().copied());
        query.execute(self)
    }

    async fn pairs<'c>(&'c mut self, sql: &'c str) -> diesel::QueryResult<Vec<(String, i64)>> {
        let rows: Vec<Pair> = diesel::sql_query(sql).load(self).await?;
        Ok(rows.into_iter().map(|p| (p.name, p.n)).collect())
    }
}

impl DemoConn for AsyncMysqlConnection {
    const SQL: &'static Statements = &MYSQL;

    fn execute<'c>(
        &'c mut self,
        sql: &'c str,
        args: &'c [Arg<'c>],
    ) -> impl Future<Output = diesel::QueryResult<usize>> + Send + 'c {
        let (sql, order) = positional(sql);
        // a `$n` with no argument is left unbound: the server refuses the statement
        let args = order.into_iter().filter_map(|n| args.get(n).copied());
        let query = bound::<diesel::mysql::Mysql>(sql, args);
        query.execute(self)
    }

    async fn pairs<'c>(&'c mut self, sql: &'c str) -> diesel::QueryResult<Vec<(String, i64)>> {
        let rows: Vec<Pair> = diesel::sql_query(sql).load(self).await?;
        Ok(rows.into_iter().map(|p| (p.name, p.n)).collect())
    }
}

/// Rewrites `$1`, `$2`, … into MySQL's `?` and returns, per `?` in order, the index
/// of the argument it takes (a number may appear more than once).
fn positional(sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut n = 0usize;
        let mut digits = 0;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            n = n * 10 + d as usize;
            digits += 1;
            chars.next();
        }
        if digits == 0 {
            out.push('$');
        } else {
            out.push('?');
            order.push(n.saturating_sub(1));
        }
    }
    (out, order)
}

/// A store the demo runs on: the hookbox traits on one connection type (with the
/// operator's views, whose counts the demo reports), and a way to check a
/// connection out for the demo's own tables.
pub(crate) trait DemoStore<C: DemoConn>:
    Inbox<Conn = C> + VersionGuard<Conn = C> + OutboxStore + InboxAdmin + OutboxAdmin + Clone + 'static
{
    /// A pooled connection.
    type Pooled: DerefMut<Target = C> + Send;

    /// Checks a connection out of the store's pool.
    fn checkout(&self) -> impl Future<Output = Result<Self::Pooled, Failure>> + Send;
}

impl DemoStore<hookbox_sqlite::Conn> for SqliteStore {
    type Pooled = hookbox_sqlite::PooledConnection;

    async fn checkout(&self) -> Result<Self::Pooled, Failure> {
        Ok(self.connection().await?)
    }
}

impl DemoStore<AsyncPgConnection> for PgStore {
    type Pooled = hookbox_diesel_pg::PooledConnection;

    async fn checkout(&self) -> Result<Self::Pooled, Failure> {
        Ok(self.connection().await?)
    }
}

impl DemoStore<AsyncMysqlConnection> for MysqlStore {
    type Pooled = hookbox_diesel_mysql::PooledConnection;

    async fn checkout(&self) -> Result<Self::Pooled, Failure> {
        Ok(self.connection().await?)
    }
}

/// Creates the demo's tables (after the store's own migration).
pub(crate) async fn create_tables<C: DemoConn>(conn: &mut C) -> Result<(), Failure> {
    for sql in C::SQL.create_tables {
        conn.execute(sql, &[]).await?;
    }
    Ok(())
}

/// Returns the worker's handler: it applies one inbox row with `store`'s version
/// guard and stages its receipt in `store`'s outbox, on the row's transaction.
pub(crate) fn handler<S, C>(store: S) -> impl Handler<C> + 'static
where
    S: VersionGuard<Conn = C> + OutboxStore + Clone + 'static,
    C: DemoConn,
{
    // each call runs on a fresh clone of the closure, and so of the store (a pool handle)
    async move |conn: &mut C, delivery: &Delivery| apply(&store, conn, delivery).await
}

/// Applies one delivery: a credit, or a plan update the version guard lets through;
/// then logs what it did and stages the receipt email, the effect that leaves the
/// database. Any error rolls all of it back with the row, the receipt included.
async fn apply<S, C>(store: &S, conn: &mut C, delivery: &Delivery) -> Result<(), HandlerError>
where
    S: VersionGuard<Conn = C> + OutboxStore,
    C: DemoConn,
{
    let payload: Payload = delivery.parse()?;
    let account = payload.account.as_str();
    let outcome = match &payload.change {
        Change::Credit { amount } => {
            conn.execute(C::SQL.credit, &[Arg::Text(account), Arg::Int(*amount)])
                .await?;
            CREDITED
        }
        Change::Plan { plan, version } => match store.advance(conn, account, *version).await? {
            Advance::Applied => {
                let args = [Arg::Text(account), Arg::Text(plan), Arg::Int(*version)];
                conn.execute(C::SQL.set_plan, &args).await?;
                PLAN_SET
            }
            // an older update after a newer one: processed, not applied
            Advance::Stale => STALE_REFUSED,
        },
    };
    let args = [
        Arg::Text(&payload.id),
        Arg::Text(outcome),
        Arg::Int(i64::from(payload.forged)),
    ];
    conn.execute(LOG, &args).await?;
    let receipt = Message::json(
        receipts::SINK,
        &serde_json::json!({ "event": payload.id, "account": account, "outcome": outcome }),
    )?
    .with_ordering_key(account);
    store
        .outbox(delivery.dedupe_key(), receipts::HANDLER)
        .stage(conn, receipt)
        .await?;
    Ok(())
}

/// The demo's tables after the run, as the database has them.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// Applications per event id (a forged row counts under the id it claimed).
    pub(crate) applied: HashMap<String, i64>,
    /// Applications per outcome ([`CREDITED`], [`PLAN_SET`], [`STALE_REFUSED`]).
    pub(crate) outcomes: HashMap<String, i64>,
    /// Applications of forged bodies.
    pub(crate) forged: i64,
    /// Credits per account.
    pub(crate) credits: HashMap<String, i64>,
    /// Plan version per account.
    pub(crate) plan_versions: HashMap<String, i64>,
}

/// Reads the demo's tables.
pub(crate) async fn read_tables<C: DemoConn>(conn: &mut C) -> Result<Tables, Failure> {
    let forged = map(
        conn,
        "SELECT outcome AS name, COUNT(*) AS n FROM demo_applied WHERE forged = 1 GROUP BY outcome",
    )
    .await?;
    Ok(Tables {
        applied: map(
            conn,
            "SELECT event_id AS name, COUNT(*) AS n FROM demo_applied GROUP BY event_id",
        )
        .await?,
        outcomes: map(
            conn,
            "SELECT outcome AS name, COUNT(*) AS n FROM demo_applied GROUP BY outcome",
        )
        .await?,
        forged: forged.values().sum(),
        credits: map(
            conn,
            "SELECT account AS name, credits AS n FROM demo_accounts",
        )
        .await?,
        plan_versions: map(
            conn,
            "SELECT account AS name, plan_version AS n FROM demo_accounts",
        )
        .await?,
    })
}

async fn map<C: DemoConn>(conn: &mut C, sql: &str) -> Result<HashMap<String, i64>, Failure> {
    Ok(conn.pairs(sql).await?.into_iter().collect())
}
