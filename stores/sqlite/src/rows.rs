//! Conversions between the store's columns and hookbox's types: the inbox and
//! outbox rows with the columns their statements select, and the inbox's insert
//! and key lookup, which the receive and group commit prepare once per connection.

use std::time::Duration;

use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Binary, Integer, Nullable, Text};
use diesel::sqlite::{Sqlite, SqliteConnection};
use diesel::{QueryResult, RunQueryDsl};
use hookbox_core::bytes::Bytes;
use hookbox_core::spi::LegacyText;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{DedupeKey, KeptHeaders, MessageId, OutboxMessage, StoredDelivery};

use crate::error::SqliteError;

/// Returns `at` as unix microseconds, the store's time column format.
pub(crate) fn micros(at: OffsetDateTime) -> i64 {
    let micros = at.unix_timestamp_nanos() / 1000;
    micros.clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// Returns the current time as unix microseconds.
pub(crate) fn now() -> i64 {
    micros(OffsetDateTime::now_utc())
}

/// Returns `micros` as a time.
pub(crate) fn from_micros(micros: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000).ok()
}

/// Returns a duration in microseconds, saturating.
pub(crate) fn duration_micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// Rebuilds a dedupe key from its columns: `source` holds the key's scope
/// (`source/tenant` when there is a tenant) and `tenant` the tenant apart. `None`
/// when `source` does not end with `/tenant`.
fn dedupe_key(
    source: String,
    provider: String,
    delivery_id: String,
    tenant: Option<String>,
) -> Option<DedupeKey> {
    Some(match tenant {
        Some(tenant) => {
            let source = source
                .strip_suffix(tenant.as_str())
                .and_then(|s| s.strip_suffix('/'))?;
            DedupeKey::new(source, provider, delivery_id).with_tenant(tenant)
        }
        None => DedupeKey::new(source, provider, delivery_id),
    })
}

/// `SELECT <every column InboxRow reads> FROM hookbox_inbox <rest>`, as a literal.
macro_rules! select_inbox {
    ($rest:literal) => {
        concat!(
            "SELECT id, source, provider, delivery_id, tenant, event_type, correlation_id, \
             signed_at, body, headers, received_at, processed_at, attempts, last_error, \
             next_attempt_at, dead_at, lease_token FROM hookbox_inbox ",
            $rest
        )
    };
}
pub(crate) use select_inbox;

/// An inbox row, as the inbox statements of [`inbox`](crate::inbox) and
/// [`work`](crate::work) select it.
#[derive(diesel::QueryableByName)]
pub(crate) struct InboxRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    source: String,
    #[diesel(sql_type = Text)]
    provider: String,
    #[diesel(sql_type = Text)]
    delivery_id: String,
    #[diesel(sql_type = Nullable<Text>)]
    tenant: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    event_type: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    correlation_id: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    signed_at: Option<i64>,
    #[diesel(sql_type = Binary)]
    body: Vec<u8>,
    #[diesel(sql_type = Text)]
    headers: String,
    #[diesel(sql_type = BigInt)]
    received_at: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    processed_at: Option<i64>,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = BigInt)]
    next_attempt_at: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    dead_at: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    lease_token: Option<i64>,
}

impl InboxRow {
    /// Returns the row's dedupe key (as stored, when its scope does not parse) and
    /// event type, for a worker's report on a row it could not read back.
    pub(crate) fn facts(&self) -> (DedupeKey, Option<String>) {
        let key = dedupe_key(
            self.source.clone(),
            self.provider.clone(),
            self.delivery_id.clone(),
            self.tenant.clone(),
        )
        .unwrap_or_else(|| {
            DedupeKey::new(
                self.source.clone(),
                self.provider.clone(),
                self.delivery_id.clone(),
            )
        });
        (key, self.event_type.clone())
    }

    /// Returns the row's id.
    pub(crate) fn id(&self) -> i64 {
        self.id
    }

    /// Returns the failures counted so far (each lease counts one until it succeeds).
    pub(crate) fn attempts(&self) -> u32 {
        u32::try_from(self.attempts).unwrap_or(0)
    }

    /// Returns `true` when the row still carries an expired lease: the worker that
    /// took it stopped (crash, kill, cancelled future) before it committed anything.
    pub(crate) fn was_interrupted(&self) -> bool {
        self.lease_token.is_some()
    }

    /// Rebuilds the delivery.
    ///
    /// # Errors
    /// [`SqliteError::Corrupt`] when a column does not hold what the store wrote.
    pub(crate) fn into_delivery(self) -> Result<StoredDelivery, SqliteError> {
        let id = self.id;
        let corrupt = |what| SqliteError::Corrupt { id, what };
        let time = |micros: i64, what| from_micros(micros).ok_or(corrupt(what));
        let optional_time = |micros: Option<i64>, what| micros.map(|m| time(m, what)).transpose();

        let key = dedupe_key(self.source, self.provider, self.delivery_id, self.tenant)
            .ok_or(corrupt("source does not end with its tenant"))?;
        Ok(StoredDelivery {
            id,
            key,
            event_type: self.event_type,
            correlation_id: self.correlation_id,
            signed_at: optional_time(self.signed_at, "signed_at")?,
            body: Bytes::from(self.body),
            // rows written before the core's codec kept each byte as one character
            headers: KeptHeaders::from_json(&self.headers, LegacyText::Latin1)
                .map_err(|_| corrupt("headers"))?,
            received_at: time(self.received_at, "received_at")?,
            attempts: u32::try_from(self.attempts).map_err(|_| corrupt("attempts"))?,
            last_error: self.last_error,
            next_attempt_at: time(self.next_attempt_at, "next_attempt_at")?,
            processed_at: optional_time(self.processed_at, "processed_at")?,
            dead_at: optional_time(self.dead_at, "dead_at")?,
        })
    }
}

/// `Inbox::receive`'s insert, prepared once per connection: `ON CONFLICT DO NOTHING`,
/// so zero rows changed means the key was stored already. Binds, in order: source,
/// provider, delivery_id, tenant, event_type, correlation_id, signed_at, body,
/// headers (the core's JSON), received_at, next_attempt_at.
pub(crate) struct ReceiveRow<'a> {
    pub(crate) source: &'a str,
    pub(crate) provider: &'a str,
    pub(crate) delivery_id: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) event_type: Option<&'a str>,
    pub(crate) correlation_id: Option<&'a str>,
    pub(crate) signed_at: Option<i64>,
    pub(crate) body: &'a [u8],
    pub(crate) headers: &'a str,
    pub(crate) received_at: i64,
}

impl QueryId for ReceiveRow<'_> {
    type QueryId = ReceiveRow<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl QueryFragment<Sqlite> for ReceiveRow<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO hookbox_inbox (source, provider, delivery_id, tenant, event_type, \
             correlation_id, signed_at, body, headers, received_at, next_attempt_at) VALUES (",
        );
        out.push_bind_param::<Text, _>(self.source)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.provider)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.delivery_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.tenant)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.event_type)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&self.correlation_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<BigInt>, _>(&self.signed_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Binary, _>(self.body)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(self.headers)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.received_at)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.received_at)?;
        out.push_sql(") ON CONFLICT DO NOTHING");
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for ReceiveRow<'_> {}

/// Group commit's duplicate check on the lookup connection, prepared once: one row
/// (`1`) when the inbox holds the key.
pub(crate) struct InboxHas<'a> {
    pub(crate) source: &'a str,
    pub(crate) provider: &'a str,
    pub(crate) delivery_id: &'a str,
}

impl QueryId for InboxHas<'_> {
    type QueryId = InboxHas<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for InboxHas<'_> {
    type SqlType = BigInt;
}

impl QueryFragment<Sqlite> for InboxHas<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("SELECT 1 FROM hookbox_inbox WHERE source = ");
        out.push_bind_param::<Text, _>(self.source)?;
        out.push_sql(" AND provider = ");
        out.push_bind_param::<Text, _>(self.provider)?;
        out.push_sql(" AND delivery_id = ");
        out.push_bind_param::<Text, _>(self.delivery_id)?;
        Ok(())
    }
}

impl RunQueryDsl<SqliteConnection> for InboxHas<'_> {}

/// `SELECT <every column OutboxRow reads> FROM hookbox_outbox <rest>`, as a literal.
macro_rules! select_outbox {
    ($rest:literal) => {
        concat!(
            "SELECT seq, message_id, source, provider, delivery_id, tenant, handler, sequence, \
             sink, ordering_key, payload, headers, staged_at, attempts, last_error, \
             next_attempt_at, sent_at, dead_at FROM hookbox_outbox ",
            $rest
        )
    };
}
pub(crate) use select_outbox;

/// An outbox row, as the outbox statements of [`outbox`](crate::outbox) select it.
#[derive(diesel::QueryableByName)]
pub(crate) struct OutboxRow {
    #[diesel(sql_type = BigInt)]
    seq: i64,
    #[diesel(sql_type = Text)]
    message_id: String,
    #[diesel(sql_type = Text)]
    source: String,
    #[diesel(sql_type = Text)]
    provider: String,
    #[diesel(sql_type = Text)]
    delivery_id: String,
    #[diesel(sql_type = Nullable<Text>)]
    tenant: Option<String>,
    #[diesel(sql_type = Text)]
    handler: String,
    #[diesel(sql_type = BigInt)]
    sequence: i64,
    #[diesel(sql_type = Text)]
    sink: String,
    #[diesel(sql_type = Nullable<Text>)]
    ordering_key: Option<String>,
    #[diesel(sql_type = Binary)]
    payload: Vec<u8>,
    #[diesel(sql_type = Text)]
    headers: String,
    #[diesel(sql_type = BigInt)]
    staged_at: i64,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = BigInt)]
    next_attempt_at: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    sent_at: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    dead_at: Option<i64>,
}

impl OutboxRow {
    /// Returns the row's `seq`.
    pub(crate) fn seq(&self) -> i64 {
        self.seq
    }

    /// Rebuilds the message.
    ///
    /// # Errors
    /// [`SqliteError::OutboxCorrupt`] when a column does not hold what the store
    /// wrote.
    pub(crate) fn into_message(self) -> Result<OutboxMessage, SqliteError> {
        let seq = self.seq;
        let corrupt = |what| SqliteError::OutboxCorrupt { seq, what };
        let time = |micros: i64, what| from_micros(micros).ok_or(corrupt(what));
        let optional_time = |micros: Option<i64>, what| micros.map(|m| time(m, what)).transpose();

        let key = dedupe_key(self.source, self.provider, self.delivery_id, self.tenant)
            .ok_or(corrupt("source does not end with its tenant"))?;
        Ok(OutboxMessage {
            seq: self.seq,
            id: MessageId::from_stored(self.message_id),
            key,
            handler: self.handler,
            sequence: u32::try_from(self.sequence).map_err(|_| corrupt("sequence"))?,
            sink: self.sink,
            ordering_key: self.ordering_key,
            payload: Bytes::from(self.payload),
            // every outbox row was written by `KeptHeaders::to_json`; the legacy form
            // is the one this crate's inbox wrote, should one ever appear
            headers: KeptHeaders::from_json(&self.headers, LegacyText::Latin1)
                .map_err(|_| corrupt("headers"))?,
            staged_at: time(self.staged_at, "staged_at")?,
            attempts: u32::try_from(self.attempts).map_err(|_| corrupt("attempts"))?,
            last_error: self.last_error,
            next_attempt_at: time(self.next_attempt_at, "next_attempt_at")?,
            sent_at: optional_time(self.sent_at, "sent_at")?,
            dead_at: optional_time(self.dead_at, "dead_at")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_at_microsecond_precision() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_790_000_039_123_456_000)
            .unwrap_or_else(|_| unreachable!());
        assert_eq!(micros(at), 1_790_000_039_123_456);
        assert_eq!(from_micros(micros(at)), Some(at));
    }
}

/// The row of a `COUNT(*) AS n`.
#[derive(diesel::QueryableByName)]
pub(crate) struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) n: i64,
}
