//! The admin filters as SQL conditions: an [`InboxFilter`] or an [`OutboxFilter`]
//! becomes a `WHERE` clause with `?` placeholders and the values to bind in order,
//! which `list`, `count` and the verbs acting on every match use.

use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::{BigInt, Binary, Text};
use diesel::sqlite::Sqlite;
use hookbox_core::{BODY_SEARCH_WINDOW, DeliveryState, InboxFilter, MessageState, OutboxFilter};

use crate::rows::micros;

/// Whether a clause keeps the filter's page cursor (`list`) or drops it (the verbs
/// that count or act on every match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cursor {
    /// Rows after the cursor only.
    Keep,
    /// Every matching row.
    Ignore,
}

/// A value bound into a clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bind {
    Text(String),
    BigInt(i64),
    Blob(Vec<u8>),
}

/// A `WHERE` clause and its binds.
#[derive(Debug, Default)]
pub(crate) struct Where {
    conditions: Vec<String>,
    binds: Vec<Bind>,
}

impl Where {
    fn push(&mut self, condition: &str) {
        self.conditions.push(condition.to_string());
    }

    fn push_bound(&mut self, condition: &str, value: Bind) {
        self.conditions.push(condition.to_string());
        self.binds.push(value);
    }

    /// `WHERE` and the conditions joined with `AND` (`WHERE 1` when there are none).
    pub(crate) fn sql(&self) -> String {
        if self.conditions.is_empty() {
            return "WHERE 1".to_string();
        }
        format!("WHERE {}", self.conditions.join(" AND "))
    }

    /// `sql` as a boxed query, with this clause's binds bound in order; bind any
    /// later placeholders on the result.
    pub(crate) fn query(self, sql: String) -> BoxedSqlQuery<'static, Sqlite, SqlQuery> {
        let mut query = diesel::sql_query(sql).into_boxed::<Sqlite>();
        for value in self.binds {
            query = match value {
                Bind::Text(text) => query.bind::<Text, _>(text),
                Bind::BigInt(n) => query.bind::<BigInt, _>(n),
                Bind::Blob(bytes) => query.bind::<Binary, _>(bytes),
            };
        }
        query
    }
}

/// The inbox rows `filter` selects. A body search looks among the newest
/// [`BODY_SEARCH_WINDOW`] rows the other conditions select (a subquery on the
/// primary key), so it reads a bounded number of bodies whatever the table's size.
pub(crate) fn inbox_where(filter: &InboxFilter, cursor: Cursor) -> Where {
    let plain = plain_inbox_where(filter, cursor);
    match filter.body_contains.as_deref() {
        None | Some("") => plain,
        Some(text) => {
            let mut clause = Where::default();
            let window = format!(
                "id IN (SELECT id FROM hookbox_inbox {} ORDER BY id DESC LIMIT {BODY_SEARCH_WINDOW})",
                plain.sql()
            );
            clause.conditions.push(window);
            clause.binds = plain.binds;
            clause.push_bound("instr(body, ?) > 0", Bind::Blob(text.as_bytes().to_vec()));
            clause
        }
    }
}

/// A delivery id under every (source, provider) pair the inbox holds, as a lookup
/// of the unique key `(source, provider, delivery_id)` per pair. The pairs are
/// enumerated from that key by seeks, one per pair (a loose index scan: the next
/// provider of this source, or else the first of the next source), so the cost is
/// a few seeks per pair, whatever the table's size. Binds: the delivery id.
const DELIVERY_ID_UNDER_EVERY_PAIR: &str = "(source, provider, delivery_id) IN ( \
     WITH RECURSIVE pairs(source, provider) AS ( \
       SELECT * FROM (SELECT source, provider FROM hookbox_inbox \
         ORDER BY source, provider LIMIT 1) \
       UNION ALL \
       SELECT \
         CASE WHEN (SELECT MIN(provider) FROM hookbox_inbox \
             WHERE source = p.source AND provider > p.provider) IS NOT NULL \
           THEN p.source \
           ELSE (SELECT MIN(source) FROM hookbox_inbox WHERE source > p.source) END, \
         COALESCE((SELECT MIN(provider) FROM hookbox_inbox \
             WHERE source = p.source AND provider > p.provider), \
           (SELECT MIN(provider) FROM hookbox_inbox WHERE source = \
             (SELECT MIN(source) FROM hookbox_inbox WHERE source > p.source))) \
       FROM pairs AS p WHERE p.source IS NOT NULL) \
     SELECT source, provider, ? FROM pairs WHERE source IS NOT NULL)";

/// `filter`'s conditions other than the body search.
fn plain_inbox_where(filter: &InboxFilter, cursor: Cursor) -> Where {
    let mut clause = Where::default();
    match filter.state {
        None => {}
        Some(DeliveryState::Pending) => clause.push("processed_at IS NULL AND dead_at IS NULL"),
        Some(DeliveryState::Failed) => {
            clause.push("processed_at IS NULL AND dead_at IS NULL AND attempts > 0");
        }
        Some(DeliveryState::Processed) => clause.push("processed_at IS NOT NULL"),
        Some(DeliveryState::Dead) => clause.push("dead_at IS NOT NULL"),
    }
    if let Some(source) = &filter.source {
        clause.push_bound("source = ?", Bind::Text(source.clone()));
    }
    if let Some(provider) = &filter.provider {
        clause.push_bound("provider = ?", Bind::Text(provider.clone()));
    }
    if let Some(event_type) = &filter.event_type {
        clause.push_bound("event_type = ?", Bind::Text(event_type.clone()));
    }
    if let Some(since) = filter.received_since {
        clause.push_bound("received_at >= ?", Bind::BigInt(micros(since)));
    }
    if let Some(before) = filter.received_before {
        clause.push_bound("received_at < ?", Bind::BigInt(micros(before)));
    }
    if let Some(delivery_id) = &filter.delivery_id {
        let condition = if filter.source.is_some() && filter.provider.is_some() {
            "delivery_id = ?"
        } else {
            // without its source and provider, a delivery id alone would scan the
            // table: look it up under each stored (source, provider) pair instead
            DELIVERY_ID_UNDER_EVERY_PAIR
        };
        clause.push_bound(condition, Bind::Text(delivery_id.clone()));
    }
    if let (Cursor::Keep, Some(before_id)) = (cursor, filter.before_id) {
        clause.push_bound("id < ?", Bind::BigInt(before_id));
    }
    clause
}

/// The outbox messages `filter` selects.
pub(crate) fn outbox_where(filter: &OutboxFilter, cursor: Cursor) -> Where {
    let mut clause = Where::default();
    match filter.state {
        None => {}
        Some(MessageState::Pending) => clause.push("sent_at IS NULL AND dead_at IS NULL"),
        Some(MessageState::Sent) => clause.push("sent_at IS NOT NULL"),
        Some(MessageState::Dead) => clause.push("dead_at IS NOT NULL"),
    }
    if let Some(sink) = &filter.sink {
        clause.push_bound("sink = ?", Bind::Text(sink.clone()));
    }
    if let Some(key) = &filter.key {
        clause.push_bound("source = ?", Bind::Text(key.scope()));
        clause.push_bound("provider = ?", Bind::Text(key.provider().to_string()));
        clause.push_bound("delivery_id = ?", Bind::Text(key.delivery_id().to_string()));
    }
    if let (Cursor::Keep, Some(before_seq)) = (cursor, filter.before_seq) {
        clause.push_bound("seq < ?", Bind::BigInt(before_seq));
    }
    clause
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_filter_selects_everything() {
        assert_eq!(
            inbox_where(&InboxFilter::all(), Cursor::Keep).sql(),
            "WHERE 1"
        );
        assert_eq!(
            outbox_where(&OutboxFilter::all(), Cursor::Keep).sql(),
            "WHERE 1"
        );
    }

    #[test]
    fn the_cursor_is_kept_for_pages_only() {
        let filter = InboxFilter::dead()
            .with_provider("stripe")
            .with_before_id(7);
        let page = inbox_where(&filter, Cursor::Keep);
        assert_eq!(
            page.sql(),
            "WHERE dead_at IS NOT NULL AND provider = ? AND id < ?"
        );
        assert_eq!(page.binds, [Bind::Text("stripe".into()), Bind::BigInt(7)]);
        let every = inbox_where(&filter, Cursor::Ignore);
        assert_eq!(every.sql(), "WHERE dead_at IS NOT NULL AND provider = ?");
    }

    #[test]
    fn a_body_search_reads_a_bounded_window() {
        let filter = InboxFilter::all()
            .with_provider("github")
            .with_body_contains("<x>");
        let clause = inbox_where(&filter, Cursor::Ignore);
        assert_eq!(
            clause.sql(),
            format!(
                "WHERE id IN (SELECT id FROM hookbox_inbox WHERE provider = ? \
                 ORDER BY id DESC LIMIT {BODY_SEARCH_WINDOW}) AND instr(body, ?) > 0"
            )
        );
        assert_eq!(
            clause.binds,
            [Bind::Text("github".into()), Bind::Blob(b"<x>".to_vec())]
        );
    }
}
