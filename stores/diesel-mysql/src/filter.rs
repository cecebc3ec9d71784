//! The admin filters as SQL conditions: an [`InboxFilter`] becomes one boxed
//! boolean expression on `hookbox_inbox`, an [`OutboxFilter`] a `WHERE` clause with
//! its binds on `hookbox_outbox`, which `list`, `count` and the verbs acting on
//! every match use.

use diesel::dsl::sql;
use diesel::expression::BoxableExpression;
use diesel::mysql::Mysql;
use diesel::prelude::*;
use diesel::sql_types::{Blob, Bool, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use hookbox_core::{BODY_SEARCH_WINDOW, DeliveryState, InboxFilter, MessageState, OutboxFilter};

use crate::error::MysqlError;
use crate::schema::hookbox_inbox as inbox;

/// A condition on inbox rows.
pub(crate) type InboxCondition = Box<dyn BoxableExpression<inbox::table, Mysql, SqlType = Bool>>;

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
    conn: &mut AsyncMysqlConnection,
    filter: &InboxFilter,
    cursor: Cursor,
) -> Result<InboxCondition, MysqlError> {
    let pairs = stored_pairs(conn, filter).await?;
    let selected = plain_inbox_condition(filter, cursor, pairs.as_deref());
    let Some(text) = filter
        .body_contains
        .as_deref()
        .filter(|text| !text.is_empty())
    else {
        return Ok(selected);
    };
    let floor: Option<i64> = inbox::table
        .select(inbox::id)
        .filter(plain_inbox_condition(filter, cursor, pairs.as_deref()))
        .order(inbox::id.desc())
        .offset(i64::from(BODY_SEARCH_WINDOW) - 1)
        .limit(1)
        .get_result(conn)
        .await
        .optional()
        .map_err(MysqlError::query)?;
    // a binary search in the raw bytes: `body` is a BLOB, so no collation folds case
    let contains = sql::<Bool>("LOCATE(")
        .bind::<Blob, _>(text.as_bytes().to_vec())
        .sql(", body) > 0");
    Ok(match floor {
        None => Box::new(selected.and(contains)),
        Some(floor) => Box::new(selected.and(inbox::id.ge(floor)).and(contains)),
    })
}

/// When `filter` names a delivery id without both its source and provider: the
/// (source, provider) pairs the inbox holds (within the source or provider it does
/// name), read by a loose index scan of the unique key (`SELECT DISTINCT`, a few
/// seeks per pair), so that the delivery id is looked up in that key once per pair
/// instead of scanning the table. `None` otherwise, and when there are more than
/// [`MAX_PAIRS`] (the delivery id is then matched alone). A pair first stored after
/// this read is not searched by this one call.
async fn stored_pairs(
    conn: &mut AsyncMysqlConnection,
    filter: &InboxFilter,
) -> Result<Option<Vec<(String, String)>>, MysqlError> {
    if filter.delivery_id.is_none() || (filter.source.is_some() && filter.provider.is_some()) {
        return Ok(None);
    }
    // raw SQL on purpose: diesel prepares it for this call alone. MariaDB 10.11 plans
    // the loose index scan on a statement's first execution and scans the whole
    // index when a cached prepared statement runs again (measured: 4 ms, then
    // 300 to 600 ms over 1,000,000 rows)
    let mut text = String::from("SELECT DISTINCT source, provider FROM hookbox_inbox");
    let scope: Vec<&str> = [
        filter.source.as_ref().map(|_| "source = ?"),
        filter.provider.as_ref().map(|_| "provider = ?"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !scope.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&scope.join(" AND "));
    }
    let mut query = diesel::sql_query(text).into_boxed::<Mysql>();
    for value in [&filter.source, &filter.provider].into_iter().flatten() {
        query = query.bind::<Text, _>(value.clone());
    }
    let pairs: Vec<StoredPair> = query.load(conn).await.map_err(MysqlError::query)?;
    // past that many, one statement of probes costs more than the scan it spares
    Ok((pairs.len() <= MAX_PAIRS).then(|| {
        pairs
            .into_iter()
            .map(|pair| (pair.source, pair.provider))
            .collect()
    }))
}

/// One (source, provider) pair of [`stored_pairs`].
#[derive(QueryableByName)]
struct StoredPair {
    #[diesel(sql_type = Text)]
    source: String,
    #[diesel(sql_type = Text)]
    provider: String,
}

/// The most (source, provider) pairs a delivery-id lookup probes one by one.
const MAX_PAIRS: usize = 1_000;

/// `filter`'s conditions other than the body search; a delivery id is looked up under
/// each of `pairs` when given (see [`stored_pairs`]).
fn plain_inbox_condition(
    filter: &InboxFilter,
    cursor: Cursor,
    pairs: Option<&[(String, String)]>,
) -> InboxCondition {
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
        let under = |(source, provider): &(String, String)| -> InboxCondition {
            Box::new(
                inbox::source
                    .eq(source.clone())
                    .and(inbox::provider.eq(provider.clone()))
                    .and(inbox::delivery_id.eq(delivery_id.clone())),
            )
        };
        // no constant seeds (`FALSE OR …`): MariaDB plans a re-executed statement
        // around them with a scan
        let lookup: InboxCondition = match pairs.and_then(|pairs| pairs.split_first()) {
            None => Box::new(inbox::delivery_id.eq(delivery_id.clone())),
            Some((first, rest)) => rest
                .iter()
                .fold(under(first), |any, pair| Box::new(any.or(under(pair)))),
        };
        condition = Box::new(condition.and(lookup));
    }
    if let (Cursor::Keep, Some(before_id)) = (cursor, filter.before_id) {
        condition = Box::new(condition.and(inbox::id.lt(before_id)));
    }
    condition
}

/// A value bound into an outbox condition.
pub(crate) enum OutboxBind {
    Text(String),
    BigInt(i64),
}

/// The messages `filter` selects, as a `WHERE` clause on `hookbox_outbox m` with
/// `?` placeholders, and the values to bind in order. (The outbox has no `table!`:
/// see `schema`.)
pub(crate) fn outbox_where(filter: &OutboxFilter, cursor: Cursor) -> (String, Vec<OutboxBind>) {
    let mut conditions: Vec<String> = Vec::new();
    let mut binds = Vec::new();
    let mut bind = |conditions: &mut Vec<String>, column: &str, op: &str, value: OutboxBind| {
        conditions.push(format!("m.{column} {op} ?"));
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
    mut query: diesel::query_builder::BoxedSqlQuery<'f, Mysql, diesel::query_builder::SqlQuery>,
    binds: Vec<OutboxBind>,
) -> diesel::query_builder::BoxedSqlQuery<'f, Mysql, diesel::query_builder::SqlQuery> {
    for value in binds {
        query = match value {
            OutboxBind::Text(text) => query.bind::<diesel::sql_types::Text, _>(text),
            OutboxBind::BigInt(n) => query.bind::<diesel::sql_types::BigInt, _>(n),
        };
    }
    query
}
