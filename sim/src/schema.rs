//! The script's tables for diesel's query builder, one definition for both modes:
//! unlike `sql_query`, a builder statement is prepared once per connection and
//! cached, as the script's `prep(db)` does. Each mode creates the tables in its own
//! dialect (`script::db` on SQLite, `pg::db` on Postgres).

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
