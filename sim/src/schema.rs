//! The script's tables for diesel, one definition for both modes: the tables for the
//! query builder (unlike `sql_query`, a builder statement is prepared once per
//! connection and cached, as the script's `prep(db)` does), and the rows the counts
//! read. Each mode creates the tables in its own dialect (`script::db` on SQLite,
//! `pg::db` on Postgres).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};

use crate::table::EndRows;

diesel::table! {
    accounts (id) {
        id -> Integer,
        credits -> BigInt,
        plan -> Nullable<Text>,
        plan_version -> BigInt,
        plan_created -> BigInt,
    }
}

diesel::table! {
    processed_events (event_id) {
        event_id -> Text,
    }
}

diesel::table! {
    // no primary key in the script's schema; only ever inserted into by the query
    // builder, so the declared key is never used
    applied (event_id) {
        event_id -> Text,
    }
}

/// How often each event was applied, as [`AppliedCount`] rows.
pub(crate) const APPLIED_COUNTS: &str =
    "SELECT event_id, count(*) AS c FROM applied GROUP BY event_id";

/// Each account's plan version, as [`PlanVersion`] rows.
pub(crate) const PLAN_VERSIONS: &str = "SELECT id, plan_version FROM accounts";

/// One event's applies.
#[derive(QueryableByName)]
pub(crate) struct AppliedCount {
    #[diesel(sql_type = Text)]
    event_id: String,
    #[diesel(sql_type = BigInt)]
    c: i64,
}

/// One account's plan version.
#[derive(QueryableByName)]
pub(crate) struct PlanVersion {
    #[diesel(sql_type = Integer)]
    id: i32,
    #[diesel(sql_type = BigInt)]
    plan_version: i64,
}

/// `count(…) AS n`.
#[derive(QueryableByName)]
pub(crate) struct Count {
    #[diesel(sql_type = BigInt)]
    pub(crate) n: i64,
}

/// `sum(…) AS s`: `NULL` over no rows.
#[derive(QueryableByName)]
pub(crate) struct Sum {
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(crate) s: Option<i64>,
}

/// A handler's end state from its database's rows and ledger.
pub(crate) fn end_rows(
    applied: Vec<AppliedCount>,
    accounts: Vec<PlanVersion>,
    ledger: i64,
) -> EndRows {
    EndRows {
        applied: applied.into_iter().map(|r| (r.event_id, r.c)).collect(),
        plan_versions: accounts
            .into_iter()
            .map(|r| (r.id, r.plan_version))
            .collect(),
        ledger,
    }
}
