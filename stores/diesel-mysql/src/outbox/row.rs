//! An outbox row as stored ([`OutboxRow`]), the columns that select it
//! (`row_columns!`), and its reading back into an [`OutboxMessage`]: shared by the
//! relay's queries in `outbox` and the operator's in `outbox::admin`.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Blob, Datetime, Integer, Nullable, Text};
use hookbox_core::bytes::Bytes;
use hookbox_core::spi::LegacyText;
use hookbox_core::{DedupeKey, KeptHeaders, MessageId, OutboxMessage};
use time::OffsetDateTime;

use crate::error::MysqlError;

/// One outbox row as stored, without the lease (which only `lease` and `settle`
/// look at). Read by name from the outbox's SQL: the table has more columns than
/// diesel's `table!` takes without its `32-column-tables` feature.
#[derive(QueryableByName)]
#[diesel(check_for_backend(diesel::mysql::Mysql))]
pub(super) struct OutboxRow {
    #[diesel(sql_type = BigInt)]
    pub(super) seq: i64,
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
    #[diesel(sql_type = Integer)]
    sequence: i32,
    #[diesel(sql_type = Text)]
    sink: String,
    #[diesel(sql_type = Nullable<Text>)]
    ordering_key: Option<String>,
    #[diesel(sql_type = Blob)]
    payload: Vec<u8>,
    #[diesel(sql_type = Text)]
    headers: String,
    #[diesel(sql_type = Datetime)]
    staged_at: OffsetDateTime,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Datetime)]
    next_attempt_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Datetime>)]
    sent_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Datetime>)]
    dead_at: Option<OffsetDateTime>,
}

/// The columns of [`OutboxRow`], of the table aliased `m`.
macro_rules! row_columns {
    () => {
        "m.seq, m.message_id, m.source, m.provider, m.delivery_id, m.tenant, m.handler, \
         m.sequence, m.sink, m.ordering_key, m.payload, m.headers, m.staged_at, \
         m.attempts, m.last_error, m.next_attempt_at, m.sent_at, m.dead_at"
    };
}
pub(super) use row_columns;

impl OutboxRow {
    /// The message this row holds: [`MysqlError::OutboxCorrupt`] when its headers
    /// cannot be read back.
    pub(super) fn into_message(self) -> Result<OutboxMessage, MysqlError> {
        // the table is newer than the core's codec, so no row holds the legacy form;
        // `Utf8` is how this crate's older inbox rows were written
        let headers = KeptHeaders::from_json(&self.headers, LegacyText::Utf8).map_err(|err| {
            MysqlError::OutboxCorrupt {
                seq: self.seq,
                source: Box::new(err),
            }
        })?;
        // `source` holds the scope, as in hookbox_inbox: the source, or source/tenant
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
        Ok(OutboxMessage {
            seq: self.seq,
            id: MessageId::from_stored(self.message_id),
            key,
            handler: self.handler,
            sequence: u32::try_from(self.sequence).unwrap_or(0),
            sink: self.sink,
            ordering_key: self.ordering_key,
            payload: Bytes::from(self.payload),
            headers,
            staged_at: self.staged_at,
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            last_error: self.last_error,
            next_attempt_at: self.next_attempt_at,
            sent_at: self.sent_at,
            dead_at: self.dead_at,
        })
    }
}
