//! The script's database on SQLite: its `freshDb` schema and 500 accounts, its
//! prepared statements, and `apply` with the (d) variants' `created` guards.

use hookbox_sqlite::diesel::connection::SimpleConnection as _;
use hookbox_sqlite::diesel::prelude::*;
use hookbox_sqlite::diesel::sql_types::BigInt;
use hookbox_sqlite::diesel::{self, QueryResult, QueryableByName, SqliteConnection};

use crate::schema::{
    self, APPLIED_COUNTS, AppliedCount, Count, PLAN_VERSIONS, PlanVersion, Sum, accounts, applied,
    processed_events,
};
use crate::seed::{Event, Kind, N_ACCOUNTS};
use crate::table::EndRows;

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY, credits INTEGER NOT NULL DEFAULT 0,
      plan TEXT, plan_version INTEGER NOT NULL DEFAULT 0, plan_created INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY);
    CREATE TABLE IF NOT EXISTS applied (event_id TEXT NOT NULL);";

#[derive(QueryableByName)]
pub(super) struct Acct {
    #[diesel(sql_type = BigInt)]
    pub(super) plan_version: i64,
    #[diesel(sql_type = BigInt)]
    plan_created: i64,
}

/// `freshDb`'s schema and 500 accounts (only when the table is empty).
fn fresh_schema(conn: &mut SqliteConnection) -> QueryResult<()> {
    conn.batch_execute(SCHEMA)?;
    let n = diesel::sql_query("SELECT count(*) n FROM accounts").get_result::<Count>(conn)?;
    if n.n == 0 {
        conn.batch_execute("BEGIN")?;
        for i in 0..N_ACCOUNTS as i32 {
            diesel::insert_into(accounts::table)
                .values(accounts::id.eq(i))
                .execute(conn)?;
        }
        conn.batch_execute("COMMIT")?;
    }
    Ok(())
}

/// Opens `file` (or `:memory:`) with the script's schema and accounts.
pub(super) fn fresh_db(file: &str) -> QueryResult<SqliteConnection> {
    let mut conn = SqliteConnection::establish(file)
        .map_err(|e| diesel::result::Error::QueryBuilderError(Box::new(e)))?;
    fresh_schema(&mut conn)?;
    Ok(conn)
}

/// The script's two `UPDATE`s as statements diesel prepares once per connection and
/// caches, as the script's `prep(db)` does: diesel never caches an `update()` or a
/// `sql_query`, but it caches any query whose type identifies its SQL.
mod updates {
    use diesel::query_builder::{AstPass, QueryFragment, QueryId};
    use diesel::sql_types::{BigInt, Integer, Text};
    use diesel::sqlite::{Sqlite, SqliteConnection};
    use diesel::{QueryResult, RunQueryDsl};

    /// `UPDATE accounts SET credits = credits + ? WHERE id = ?`
    #[derive(QueryId)]
    pub(super) struct Credit {
        pub(super) amount: i64,
        pub(super) acct: i32,
    }

    impl QueryFragment<Sqlite> for Credit {
        fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
            out.push_sql("UPDATE accounts SET credits = credits + ");
            out.push_bind_param::<BigInt, _>(&self.amount)?;
            out.push_sql(" WHERE id = ");
            out.push_bind_param::<Integer, _>(&self.acct)
        }
    }

    impl RunQueryDsl<SqliteConnection> for Credit {}

    /// `UPDATE accounts SET plan = ?, plan_version = ?, plan_created = ? WHERE id = ?`
    #[derive(QueryId)]
    pub(super) struct SetPlan {
        pub(super) plan: String,
        pub(super) version: i64,
        pub(super) created: i64,
        pub(super) acct: i32,
    }

    impl QueryFragment<Sqlite> for SetPlan {
        fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
            out.push_sql("UPDATE accounts SET plan = ");
            out.push_bind_param::<Text, _>(&self.plan)?;
            out.push_sql(", plan_version = ");
            out.push_bind_param::<BigInt, _>(&self.version)?;
            out.push_sql(", plan_created = ");
            out.push_bind_param::<BigInt, _>(&self.created)?;
            out.push_sql(" WHERE id = ");
            out.push_bind_param::<Integer, _>(&self.acct)
        }
    }

    impl RunQueryDsl<SqliteConnection> for SetPlan {}
}

pub(super) fn sql_credit(
    conn: &mut SqliteConnection,
    amount: i64,
    acct: i32,
) -> QueryResult<usize> {
    updates::Credit { amount, acct }.execute(conn)
}

fn sql_set_plan(conn: &mut SqliteConnection, e: &Event) -> QueryResult<usize> {
    updates::SetPlan {
        plan: format!("plan_v{}", e.version),
        version: e.version,
        created: e.created,
        acct: e.acct,
    }
    .execute(conn)
}

pub(super) fn sql_get_acct(conn: &mut SqliteConnection, acct: i32) -> QueryResult<Acct> {
    let (plan_version, plan_created) = accounts::table
        .find(acct)
        .select((accounts::plan_version, accounts::plan_created))
        .get_result::<(i64, i64)>(conn)?;
    Ok(Acct {
        plan_version,
        plan_created,
    })
}

pub(super) fn sql_applied(conn: &mut SqliteConnection, id: &str) -> QueryResult<usize> {
    diesel::insert_into(applied::table)
        .values(applied::event_id.eq(id))
        .execute(conn)
}

pub(super) fn sql_seen(conn: &mut SqliteConnection, id: &str) -> QueryResult<bool> {
    processed_events::table
        .find(id)
        .select(processed_events::event_id)
        .get_result::<String>(conn)
        .optional()
        .map(|r| r.is_some())
}

pub(super) fn sql_mark(conn: &mut SqliteConnection, id: &str) -> QueryResult<usize> {
    diesel::insert_into(processed_events::table)
        .values(processed_events::event_id.eq(id))
        .execute(conn)
}

pub(super) fn sql_claim(conn: &mut SqliteConnection, id: &str) -> QueryResult<usize> {
    diesel::insert_into(processed_events::table)
        .values(processed_events::event_id.eq(id))
        .on_conflict_do_nothing()
        .execute(conn)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Guard {
    None,
    CreatedGe,
    CreatedGt,
    /// the version guard already passed (hookbox's `VersionGuard::advance`)
    Passed,
}

/// `apply(s, e, guard)`; returns `true` when the write was a stale write (an older
/// plan overwrote a newer one).
pub(super) fn apply(conn: &mut SqliteConnection, e: &Event, guard: Guard) -> QueryResult<bool> {
    if e.kind == Kind::Credit {
        sql_credit(conn, e.amount, e.acct)?;
        sql_applied(conn, &e.id)?;
        return Ok(false);
    }
    let cur = sql_get_acct(conn, e.acct)?;
    let ok = match guard {
        Guard::None | Guard::Passed => true,
        Guard::CreatedGe => e.created >= cur.plan_created,
        Guard::CreatedGt => e.created > cur.plan_created,
    };
    if !ok {
        return Ok(false); // stale: recorded as processed, not applied
    }
    let stale = e.version < cur.plan_version;
    sql_set_plan(conn, e)?;
    sql_applied(conn, &e.id)?;
    Ok(stale)
}

/// What a handler's database holds at the end of its run, for its table row.
pub(super) fn end_rows(conn: &mut SqliteConnection) -> QueryResult<EndRows> {
    let applied = diesel::sql_query(APPLIED_COUNTS).load::<AppliedCount>(conn)?;
    let accounts = diesel::sql_query(PLAN_VERSIONS).load::<PlanVersion>(conn)?;
    Ok(schema::end_rows(applied, accounts, ledger(conn)?))
}

/// `sum(credits)` over the accounts.
pub(super) fn ledger(conn: &mut SqliteConnection) -> QueryResult<i64> {
    diesel::sql_query("SELECT sum(credits) s FROM accounts")
        .get_result::<Sum>(conn)
        .map(|s| s.s.unwrap_or(0))
}

/// Runs `SELECT … n` returning one count.
pub(super) fn count(conn: &mut SqliteConnection, sql: &str) -> QueryResult<i64> {
    diesel::sql_query(sql)
        .get_result::<Count>(conn)
        .map(|c| c.n)
}
