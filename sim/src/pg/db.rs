//! The Postgres side: one fresh schema per handler and crash design with the script's
//! tables, the script's statements, and the counts the tables are made of.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hookbox_diesel_pg::diesel::sql_types::Text;
use hookbox_diesel_pg::diesel::{
    self, ExpressionMethods as _, QueryDsl as _, QueryResult, QueryableByName,
};
use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _, SimpleAsyncConnection as _,
};
use hookbox_diesel_pg::{PgOptions, PgStore};

use crate::error::failed;
use crate::schema::{
    self, APPLIED_COUNTS, AppliedCount, Count, PLAN_VERSIONS, PlanVersion, Sum, accounts, applied,
    processed_events,
};
use crate::seed::{Event, Kind, N_ACCOUNTS};
use crate::table::EndRows;

/// The script's `freshDb` tables, in Postgres types (`BIGINT` where SQLite's
/// `INTEGER` holds 64 bits).
const TABLES: &str = "
    CREATE TABLE accounts (id INTEGER PRIMARY KEY, credits BIGINT NOT NULL DEFAULT 0,
      plan TEXT, plan_version BIGINT NOT NULL DEFAULT 0, plan_created BIGINT NOT NULL DEFAULT 0);
    CREATE TABLE processed_events (event_id TEXT PRIMARY KEY);
    CREATE TABLE applied (event_id TEXT NOT NULL);";

/// The schemas of one run, all named `<prefix>_<suffix>`; [`Schemas::drop_all`]
/// drops them, and dropping the value drops any that are left (a panic mid-run).
pub(super) struct Schemas {
    url: String,
    prefix: String,
    created: Mutex<Vec<String>>,
}

/// A schema of the run: its name and the server it lives on.
pub(super) struct Schema {
    pub(super) name: String,
    pub(super) url: String,
}

impl Schemas {
    pub(super) fn new(url: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self {
            url: url.to_string(),
            prefix: format!(
                "hookbox_sim_{:x}_{nanos:08x}_{}",
                std::process::id(),
                RUNS.fetch_add(1, Ordering::Relaxed)
            ),
            created: Mutex::new(Vec::new()),
        }
    }

    /// The common start of every schema name of this run.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Creates `<prefix>_<suffix>` with the script's tables (500 accounts) and
    /// hookbox's own (`migrate`).
    pub(super) async fn create(&self, suffix: &str) -> io::Result<Schema> {
        let name = format!("{}_{suffix}", self.prefix);
        let mut conn = establish(&self.url).await?;
        conn.batch_execute(&format!("CREATE SCHEMA \"{name}\""))
            .await
            .map_err(|e| failed("creating the schema", &e))?;
        lock(&self.created).push(name.clone());
        conn.batch_execute(&format!(
            "SET search_path TO \"{name}\"; {TABLES}
             INSERT INTO accounts (id) SELECT generate_series(0, {});",
            N_ACCOUNTS - 1
        ))
        .await
        .map_err(|e| failed("creating the sim's tables", &e))?;
        let schema = Schema {
            name,
            url: self.url.clone(),
        };
        let store = schema.store(1).await?;
        store
            .migrate()
            .await
            .map_err(|e| failed("migrating the hookbox tables", &e))?;
        Ok(schema)
    }

    /// Drops every schema this run created; returns how long that took.
    pub(super) async fn drop_all(&self) -> io::Result<Duration> {
        let t0 = Instant::now();
        let names = std::mem::take(&mut *lock(&self.created));
        if names.is_empty() {
            return Ok(t0.elapsed());
        }
        let mut conn = establish(&self.url).await?;
        for name in names {
            conn.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                .await
                .map_err(|e| failed(&format!("dropping schema {name}"), &e))?;
        }
        Ok(t0.elapsed())
    }
}

impl Drop for Schemas {
    fn drop(&mut self) {
        if lock(&self.created).is_empty() {
            return;
        }
        // a panic unwound past `drop_all`: drop what is left from a thread with a
        // runtime of its own (this one may be inside, or be, the run's runtime)
        let schemas = Schemas {
            url: self.url.clone(),
            prefix: self.prefix.clone(),
            created: Mutex::new(std::mem::take(&mut *lock(&self.created))),
        };
        let _ = std::thread::spawn(move || {
            if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                let _ = runtime.block_on(schemas.drop_all());
            }
        })
        .join();
    }
}

/// Locks `m`, also after a panic poisoned it (the list stays valid).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Schema {
    /// A store on this schema with a pool of `connections`.
    pub(super) async fn store(&self, connections: usize) -> io::Result<PgStore> {
        PgStore::connect(
            &self.url,
            PgOptions::new()
                .with_schema(&self.name)
                .with_max_connections(connections),
        )
        .await
        .map_err(|e| failed("connecting to postgres", &e))
    }
}

async fn establish(url: &str) -> io::Result<AsyncPgConnection> {
    AsyncPgConnection::establish(url)
        .await
        .map_err(|e| failed("connecting to postgres", &e))
}

/// The server's `server_version`, for the header.
pub(super) async fn server_version(url: &str) -> io::Result<String> {
    #[derive(QueryableByName)]
    struct V {
        #[diesel(sql_type = Text)]
        server_version: String,
    }
    let mut conn = establish(url).await?;
    diesel::sql_query("SHOW server_version")
        .get_result::<V>(&mut conn)
        .await
        .map(|v| v.server_version)
        .map_err(|e| failed("reading the server version", &e))
}

/// `s.credit` and `s.applied`: the credit side effect.
pub(super) async fn credit(conn: &mut AsyncPgConnection, id: &str, acct: i32) -> QueryResult<()> {
    diesel::update(accounts::table.find(acct))
        .set(accounts::credits.eq(accounts::credits + 100i64))
        .execute(conn)
        .await?;
    applied(conn, id).await
}

async fn applied(conn: &mut AsyncPgConnection, id: &str) -> QueryResult<()> {
    diesel::insert_into(applied::table)
        .values(applied::event_id.eq(id))
        .execute(conn)
        .await
        .map(drop)
}

/// `apply(s, e)` without an ordering guard; returns `true` for a stale write (an
/// older plan overwrote a newer one).
///
/// Call it inside a transaction: the account row is read `FOR UPDATE`, so the
/// version it compares with is the one it overwrites, and the stale-write count is
/// exact under concurrency (a plain read could be overtaken before the write).
pub(super) async fn apply(conn: &mut AsyncPgConnection, e: &Event) -> QueryResult<bool> {
    if e.kind == Kind::Credit {
        credit(conn, &e.id, e.acct).await?;
        return Ok(false);
    }
    let current: i64 = accounts::table
        .find(e.acct)
        .select(accounts::plan_version)
        .for_update()
        .first(conn)
        .await?;
    diesel::update(accounts::table.find(e.acct))
        .set((
            accounts::plan.eq(format!("plan_v{}", e.version)),
            accounts::plan_version.eq(e.version),
            accounts::plan_created.eq(e.created),
        ))
        .execute(conn)
        .await?;
    applied(conn, &e.id).await?;
    Ok(e.version < current)
}

/// `s.seen`: the check of check-then-insert.
pub(super) async fn seen(conn: &mut AsyncPgConnection, id: &str) -> QueryResult<bool> {
    diesel::select(diesel::dsl::exists(processed_events::table.find(id)))
        .get_result(conn)
        .await
}

/// `s.mark`: the insert of check-then-insert, a statement of its own (autocommit).
pub(super) async fn mark(conn: &mut AsyncPgConnection, id: &str) -> QueryResult<()> {
    diesel::insert_into(processed_events::table)
        .values(processed_events::event_id.eq(id))
        .execute(conn)
        .await
        .map(drop)
}

/// Runs `apply` in a transaction of its own.
pub(super) async fn apply_in_tx(conn: &mut AsyncPgConnection, e: &Event) -> QueryResult<bool> {
    conn.transaction(async move |conn| apply(conn, e).await)
        .await
}

/// What the schema holds at the end of a handler's run, for its table row.
pub(super) async fn end_rows(conn: &mut AsyncPgConnection) -> io::Result<EndRows> {
    let applied = diesel::sql_query(APPLIED_COUNTS)
        .load::<AppliedCount>(conn)
        .await
        .map_err(|e| failed("counting applies", &e))?;
    let accounts = diesel::sql_query(PLAN_VERSIONS)
        .load::<PlanVersion>(conn)
        .await
        .map_err(|e| failed("reading the accounts", &e))?;
    Ok(schema::end_rows(applied, accounts, ledger(conn).await?))
}

/// `sum(credits)` over the accounts.
pub(super) async fn ledger(conn: &mut AsyncPgConnection) -> io::Result<i64> {
    // sum(bigint) is numeric in Postgres: cast back
    diesel::sql_query("SELECT sum(credits)::BIGINT AS s FROM accounts")
        .get_result::<Sum>(conn)
        .await
        .map(|s| s.s.unwrap_or(0))
        .map_err(|e| failed("summing the ledger", &e))
}

/// Runs `SELECT … AS n` returning one BIGINT.
pub(super) async fn count(conn: &mut AsyncPgConnection, sql: &str) -> io::Result<i64> {
    diesel::sql_query(sql)
        .get_result::<Count>(conn)
        .await
        .map(|c| c.n)
        .map_err(|e| failed("counting rows", &e))
}
