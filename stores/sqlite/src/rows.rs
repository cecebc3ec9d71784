//! Conversions between the store's columns and hookbox's types.

use std::time::Duration;

use diesel::sql_types::{BigInt, Binary, Integer, Nullable, Text};
use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{DedupeKey, KeptHeaders, LegacyText, StoredDelivery};

use crate::error::SqliteError;

/// Returns `at` as unix microseconds, the store's time column format.
pub(crate) fn micros(at: OffsetDateTime) -> i64 {
    let micros = at.unix_timestamp_nanos() / 1000;
    micros.clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// Returns `micros` as a time.
pub(crate) fn from_micros(micros: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000).ok()
}

/// Returns a duration in microseconds, saturating.
pub(crate) fn duration_micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// An inbox row, as the inbox statements of [`sql`](crate::sql) select it.
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

        let provider = self.provider;
        // `source` holds the key's scope: `source/tenant` when there is a tenant
        let key = match self.tenant {
            Some(tenant) => {
                let source = self
                    .source
                    .strip_suffix(tenant.as_str())
                    .and_then(|s| s.strip_suffix('/'))
                    .ok_or(corrupt("source does not end with its tenant"))?;
                DedupeKey::new(source, provider, self.delivery_id).with_tenant(tenant)
            }
            None => DedupeKey::new(self.source, provider, self.delivery_id),
        };
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
