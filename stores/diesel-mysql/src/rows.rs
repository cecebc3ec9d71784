//! Conversions between the store's columns and hookbox's types: the inbox row, as
//! the inbox's reads and its worker select it.

use diesel::prelude::*;
use hookbox_core::bytes::Bytes;
use hookbox_core::spi::LegacyText;
use hookbox_core::{DedupeKey, KeptHeaders, StoredDelivery};
use time::OffsetDateTime;

use crate::error::MysqlError;
use crate::schema::hookbox_inbox as inbox;

/// One inbox row as stored.
#[derive(Queryable, Selectable)]
#[diesel(table_name = inbox)]
#[diesel(check_for_backend(diesel::mysql::Mysql))]
pub(crate) struct InboxRow {
    pub(crate) id: i64,
    source: String,
    provider: String,
    delivery_id: String,
    tenant: Option<String>,
    event_type: Option<String>,
    body: Vec<u8>,
    headers: String,
    received_at: OffsetDateTime,
    processed_at: Option<OffsetDateTime>,
    pub(crate) attempts: i32,
    last_error: Option<String>,
    next_attempt_at: OffsetDateTime,
    dead_at: Option<OffsetDateTime>,
    correlation_id: Option<String>,
    signed_at: Option<OffsetDateTime>,
}

impl InboxRow {
    /// Returns the row's key (its stored scope as the source) and event type, for a
    /// worker's report on a row it could not read back.
    pub(crate) fn facts(&self) -> (DedupeKey, Option<String>) {
        let key = DedupeKey::new(
            self.source.clone(),
            self.provider.clone(),
            self.delivery_id.clone(),
        );
        (key, self.event_type.clone())
    }

    pub(crate) fn into_delivery(self) -> Result<StoredDelivery, MysqlError> {
        let corrupt = |source: Box<dyn std::error::Error + Send + Sync>| MysqlError::Corrupt {
            id: self.id,
            source,
        };
        // rows written before the core's codec kept values as (lossy) UTF-8 text
        let headers = KeptHeaders::from_json(&self.headers, LegacyText::Utf8)
            .map_err(|err| corrupt(Box::new(err)))?;
        // `source` holds the scope: the source, or source/tenant
        let source = match &self.tenant {
            Some(tenant) => self
                .source
                .strip_suffix(tenant.as_str())
                .and_then(|s| s.strip_suffix('/'))
                .unwrap_or(&self.source),
            None => &self.source,
        };
        let mut key = DedupeKey::new(source, self.provider, self.delivery_id);
        if let Some(tenant) = self.tenant {
            key = key.with_tenant(tenant);
        }
        Ok(StoredDelivery {
            id: self.id,
            key,
            event_type: self.event_type,
            correlation_id: self.correlation_id,
            signed_at: self.signed_at,
            body: Bytes::from(self.body),
            headers,
            received_at: self.received_at,
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            last_error: self.last_error,
            next_attempt_at: self.next_attempt_at,
            processed_at: self.processed_at,
            dead_at: self.dead_at,
        })
    }
}
