//! The admin filters as SQL conditions: an [`InboxFilter`] becomes one boxed
//! boolean expression on `hookbox_inbox`, an [`OutboxFilter`] a `WHERE` clause with
//! its binds on `hookbox_outbox`, which `list`, `count` and the verbs acting on
//! every match use.

use diesel::dsl::sql;
use diesel::expression::BoxableExpression;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Bool, Bytea, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::{BODY_SEARCH_WINDOW, DeliveryState, InboxFilter, MessageState, OutboxFilter};

use crate::error::PgError;
use crate::schema::hookbox_inbox as inbox;

/// A condition on inbox rows.
pub(crate) type InboxCondition = Box<dyn BoxableExpression<inbox::table, Pg, SqlType = Bool>>;

/// Whether a condition keeps the filter's page cursor (`list`) or drops it (the
/// verbs that count or act on every match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cursor {
    /// Rows after the cursor only.
    Keep,
    /// Every matching row.
    Ignore,
}

/// The rows `filter` selects. A body search looks among the newest
/// [`BODY_SEARCH_WINDOW`] rows the other conditions select: a first statement finds
/// the window's oldest id (through the primary key), so the search reads a bounded
/// number of bodies whatever the table's size.
pub(crate) async fn inbox_condition(
    conn: &mut AsyncPgConnection,
    filter: &InboxFilter,
    cursor: Cursor,
) -> Result<InboxCondition, PgError> {
    let selected = plain_inbox_condition(filter, cursor);
    let Some(text) = filter
        .body_contains
        .as_deref()
        .filter(|text| !text.is_empty())
    else {
        return Ok(selected);
    };
    let floor: Option<i64> = inbox::table
        .select(inbox::id)
        .filter(plain_inbox_condition(filter, cursor))
        .order(inbox::id.desc())
        .offset(i64::from(BODY_SEARCH_WINDOW) - 1)
        .limit(1)
        .get_result(conn)
        .await
        .optional()
        .map_err(PgError::query)?;
    let contains = sql::<Bool>("position(")
        .bind::<Bytea, _>(text.as_bytes().to_vec())
        .sql(" in body) > 0");
    Ok(match floor {
        None => Box::new(selected.and(contains)),
        Some(floor) => Box::new(selected.and(inbox::id.ge(floor)).and(contains)),
    })
}

/// `filter`'s conditions other than the body search.
fn plain_inbox_condition(filter: &InboxFilter, cursor: Cursor) -> InboxCondition {
    let mut condition: InboxCondition = match filter.state {
        None => Box::new(diesel::dsl::sql::<Bool>("TRUE")),
        Some(DeliveryState::Pending) => {
            Box::new(inbox::processed_at.is_null().and(inbox::dead_at.is_null()))
        }
        Some(DeliveryState::Failed) => Box::new(
            inbox::processed_at
                .is_null()
                .and(inbox::dead_at.is_null())
                .and(inbox::attempts.gt(0)),
        ),
        Some(DeliveryState::Processed) => Box::new(inbox::processed_at.is_not_null()),
        Some(DeliveryState::Dead) => Box::new(inbox::dead_at.is_not_null()),
    };
    if let Some(source) = &filter.source {
        condition = Box::new(condition.and(inbox::source.eq(source.clone())));
    }
    if let Some(provider) = &filter.provider {
        condition = Box::new(condition.and(inbox::provider.eq(provider.clone())));
    }
    if let Some(event_type) = &filter.event_type {
        condition =
            Box::new(condition.and(inbox::event_type.assume_not_null().eq(event_type.clone())));
    }
    if let Some(since) = filter.received_since {
        condition = Box::new(condition.and(inbox::received_at.ge(since)));
    }
    if let Some(before) = filter.received_before {
        condition = Box::new(condition.and(inbox::received_at.lt(before)));
    }
    if let Some(delivery_id) = &filter.delivery_id {
        condition = if filter.source.is_some() && filter.provider.is_some() {
            Box::new(condition.and(inbox::delivery_id.eq(delivery_id.clone())))
        } else {
            // without its source and provider, a delivery id alone would scan the
            // table: look it up under each stored (source, provider) pair instead
            Box::new(
                condition.and(
                    sql::<Bool>(DELIVERY_ID_UNDER_EVERY_PAIR)
                        .bind::<Text, _>(delivery_id.clone())
                        .sql("::text FROM pairs)"),
                ),
            )
        };
    }
    if let (Cursor::Keep, Some(before_id)) = (cursor, filter.before_id) {
        condition = Box::new(condition.and(inbox::id.lt(before_id)));
    }
    condition
}

/// A delivery id under every (source, provider) pair the inbox holds, as a lookup
/// of the unique key `(source, provider, delivery_id)` per pair. The pairs are
/// enumerated from that key by one index seek each (a loose index scan: the first
/// pair after the previous one), so the cost is a seek per pair, whatever the
/// table's size; no index on `delivery_id` alone is written by every receive. The
/// caller binds the delivery id and closes the statement (`::text FROM pairs)`).
const DELIVERY_ID_UNDER_EVERY_PAIR: &str = "(hookbox_inbox.source, hookbox_inbox.provider, \
       hookbox_inbox.delivery_id) IN ( \
     WITH RECURSIVE pairs(source, provider) AS ( \
       (SELECT i.source, i.provider FROM hookbox_inbox i \
         ORDER BY i.source, i.provider LIMIT 1) \
       UNION ALL \
       SELECT next.source, next.provider FROM pairs p CROSS JOIN LATERAL ( \
         SELECT i.source, i.provider FROM hookbox_inbox i \
         WHERE (i.source, i.provider) > (p.source, p.provider) \
         ORDER BY i.source, i.provider LIMIT 1) next) \
     SELECT source, provider, ";

/// A value bound into an outbox condition.
pub(crate) enum OutboxBind {
    Text(String),
    BigInt(i64),
}

/// The messages `filter` selects, as a `WHERE` clause on `hookbox_outbox m` whose
/// placeholders start at `$first`, and the values to bind in order. (The outbox has
/// no `table!`: see `schema`.)
pub(crate) fn outbox_where(
    filter: &OutboxFilter,
    cursor: Cursor,
    first: usize,
) -> (String, Vec<OutboxBind>) {
    let mut conditions: Vec<String> = Vec::new();
    let mut binds = Vec::new();
    let mut bind = |conditions: &mut Vec<String>, column: &str, op: &str, value: OutboxBind| {
        conditions.push(format!("m.{column} {op} ${}", first + binds.len()));
        binds.push(value);
    };
    match filter.state {
        None => {}
        Some(MessageState::Pending) => {
            conditions.push("m.sent_at IS NULL AND m.dead_at IS NULL".to_string());
        }
        Some(MessageState::Sent) => conditions.push("m.sent_at IS NOT NULL".to_string()),
        Some(MessageState::Dead) => conditions.push("m.dead_at IS NOT NULL".to_string()),
    }
    if let Some(sink) = &filter.sink {
        bind(&mut conditions, "sink", "=", OutboxBind::Text(sink.clone()));
    }
    if let Some(key) = &filter.key {
        bind(
            &mut conditions,
            "source",
            "=",
            OutboxBind::Text(key.scope()),
        );
        let provider = OutboxBind::Text(key.provider().to_string());
        bind(&mut conditions, "provider", "=", provider);
        let delivery_id = OutboxBind::Text(key.delivery_id().to_string());
        bind(&mut conditions, "delivery_id", "=", delivery_id);
    }
    if let (Cursor::Keep, Some(before_seq)) = (cursor, filter.before_seq) {
        bind(&mut conditions, "seq", "<", OutboxBind::BigInt(before_seq));
    }
    if conditions.is_empty() {
        return ("WHERE TRUE".to_string(), binds);
    }
    (format!("WHERE {}", conditions.join(" AND ")), binds)
}

/// `query` with `binds` bound in order.
pub(crate) fn bind_outbox<'f>(
    mut query: diesel::query_builder::BoxedSqlQuery<'f, Pg, diesel::query_builder::SqlQuery>,
    binds: Vec<OutboxBind>,
) -> diesel::query_builder::BoxedSqlQuery<'f, Pg, diesel::query_builder::SqlQuery> {
    for value in binds {
        query = match value {
            OutboxBind::Text(text) => query.bind::<diesel::sql_types::Text, _>(text),
            OutboxBind::BigInt(n) => query.bind::<diesel::sql_types::BigInt, _>(n),
        };
    }
    query
}
