//! Conversions between the store's columns and hookbox's types.

use std::time::Duration;

use diesel::sql_types::{BigInt, Binary, Integer, Nullable, Text};
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{DedupeKey, KeptHeaders, StoredDelivery};

use crate::SqliteError;

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

/// Encodes kept headers as a JSON array of `[name, value]` pairs.
///
/// Values are visible ASCII in practice (providers reject anything else before a
/// delivery verifies); other bytes are kept losslessly by mapping each byte to the
/// code point of the same number (Latin-1), which is the identity on ASCII.
pub(crate) fn encode_headers(headers: &KeptHeaders) -> String {
    let pairs: Vec<serde_json::Value> = headers
        .iter()
        .map(|(name, value)| {
            let value: String = value.as_bytes().iter().map(|&b| char::from(b)).collect();
            serde_json::Value::from(vec![name.as_str().to_string(), value])
        })
        .collect();
    serde_json::Value::from(pairs).to_string()
}

/// Decodes [`encode_headers`]' output.
pub(crate) fn decode_headers(json: &str) -> Option<KeptHeaders> {
    let pairs: Vec<(String, String)> = serde_json::from_str(json).ok()?;
    pairs
        .into_iter()
        .map(|(name, value)| {
            let bytes = value
                .chars()
                .map(|c| u8::try_from(u32::from(c)).ok())
                .collect::<Option<Vec<u8>>>()?;
            Some((
                HeaderName::from_bytes(name.as_bytes()).ok()?,
                HeaderValue::from_bytes(&bytes).ok()?,
            ))
        })
        .collect()
}

/// An inbox row as selected by [`inbox_columns!`].
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

/// The columns [`InboxRow`] reads, as a literal for `concat!`.
macro_rules! inbox_columns {
    () => {
        "id, source, provider, delivery_id, tenant, event_type, correlation_id, signed_at, body, \
         headers, received_at, processed_at, attempts, last_error, next_attempt_at, dead_at, \
         lease_token"
    };
}
pub(crate) use inbox_columns;

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
            headers: decode_headers(&self.headers).ok_or(corrupt("headers"))?,
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
    fn headers_round_trip_including_non_ascii_bytes() {
        let mut headers = KeptHeaders::default();
        headers.push(
            HeaderName::from_static("webhook-id"),
            HeaderValue::from_static("msg_1"),
        );
        headers.push(
            HeaderName::from_static("x-odd"),
            HeaderValue::from_bytes(b"caf\xe9 \"q\"").unwrap_or_else(|_| unreachable!()),
        );
        let json = encode_headers(&headers);
        assert!(json.starts_with(r#"[["webhook-id","msg_1"]"#), "{json}");
        assert_eq!(decode_headers(&json), Some(headers));
    }

    #[test]
    fn times_round_trip_at_microsecond_precision() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_790_000_039_123_456_000)
            .unwrap_or_else(|_| unreachable!());
        assert_eq!(micros(at), 1_790_000_039_123_456);
        assert_eq!(from_micros(micros(at)), Some(at));
    }
}
