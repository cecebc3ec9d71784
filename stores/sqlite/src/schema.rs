//! The hot statements, in forms diesel prepares once per connection and caches.
//!
//! diesel caches a statement only when its type identifies its SQL: a query-builder
//! `insert_into` or `select` is cached, while `sql_query` text and any upsert with
//! `DO UPDATE` are parsed and planned again on every call. The claim is a plain
//! builder insert; the version guards' conditional upserts are small
//! [`QueryFragment`]s with a static query id.

use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel::{QueryResult, RunQueryDsl};

diesel::table! {
    hookbox_processed_keys (source, provider, delivery_id) {
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        received_at -> BigInt,
    }
}

diesel::table! {
    hookbox_version_times (object) {
        object -> Text,
        at_micros -> BigInt,
    }
}

/// Stores `version` for `object` only when it is newer; the upsert's `WHERE` makes
/// "not newer" a no-op (zero rows changed).
pub(crate) struct AdvanceVersion<'a> {
    pub(crate) object: &'a str,
    pub(crate) version: i64,
}

impl QueryId for AdvanceVersion<'_> {
    type QueryId = AdvanceVersion<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for AdvanceVersion<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO hookbox_versions (object, version) VALUES (");
        out.push_bind_param::<Text, _>(self.object)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.version)?;
        out.push_sql(
            ") ON CONFLICT (object) DO UPDATE SET version = excluded.version \
             WHERE excluded.version > hookbox_versions.version",
        );
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for AdvanceVersion<'_> {}

/// Stores `at_micros` for `object` only when it is strictly later.
pub(crate) struct AdvanceTime<'a> {
    pub(crate) object: &'a str,
    pub(crate) at_micros: i64,
}

impl QueryId for AdvanceTime<'_> {
    type QueryId = AdvanceTime<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for AdvanceTime<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO hookbox_version_times (object, at_micros) VALUES (");
        out.push_bind_param::<Text, _>(self.object)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.at_micros)?;
        out.push_sql(
            ") ON CONFLICT (object) DO UPDATE SET at_micros = excluded.at_micros \
             WHERE excluded.at_micros > hookbox_version_times.at_micros",
        );
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for AdvanceTime<'_> {}
