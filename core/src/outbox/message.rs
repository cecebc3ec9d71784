//! What a handler stages: a [`Message`] for a sink, and the [`MessageId`] it gets.

use std::fmt;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use sha2::{Digest as _, Sha256};

use crate::{DedupeKey, KeptHeaders};

/// A message's stable id: the same delivery, handler and position always give the
/// same id, which the relay sends as the downstream's idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(String);

impl MessageId {
    /// Derives the id of message number `sequence` (from 0) that `handler` staged
    /// for the delivery `key`: 32 lower-case hex digits of a SHA-256 over the
    /// length-prefixed parts, so no two different inputs share an id by
    /// concatenation.
    pub fn derive(key: &DedupeKey, handler: &str, sequence: u32) -> Self {
        let mut hash = Sha256::new();
        let tenant = key.tenant().unwrap_or("");
        for part in [
            "hookbox-outbox-v1",
            key.source(),
            tenant,
            key.provider(),
            key.delivery_id(),
            handler,
        ] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        hash.update(u64::from(key.tenant().is_some()).to_be_bytes());
        hash.update(sequence.to_be_bytes());
        let digest = hash.finalize();
        let mut text = String::with_capacity(32);
        for byte in &digest[..16] {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        Self(text)
    }

    /// Wraps an id read back from a store or typed by an operator.
    pub fn from_stored(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// Returns the id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A message for a sink, as a handler builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub(super) sink: String,
    ordering_key: Option<String>,
    payload: Bytes,
    headers: KeptHeaders,
}

impl Message {
    /// A message with `payload` as it is, for the sink named `sink`.
    pub fn new(sink: impl Into<String>, payload: impl Into<Bytes>) -> Self {
        Self {
            sink: sink.into(),
            ordering_key: None,
            payload: payload.into(),
            headers: KeptHeaders::default(),
        }
    }

    /// A message whose payload is `value` as JSON, with `content-type:
    /// application/json`.
    ///
    /// # Errors
    /// `value` does not serialize.
    pub fn json<T: serde::Serialize + ?Sized>(
        sink: impl Into<String>,
        value: &T,
    ) -> Result<Self, serde_json::Error> {
        let payload = serde_json::to_vec(value)?;
        Ok(Self::new(sink, payload).with_header(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ))
    }

    /// Orders this message after every earlier message with the same key: the relay
    /// sends it only once those are sent (or dead).
    ///
    /// "Earlier" is staging order: the order of the `stage` calls in one
    /// transaction, and the order of the inserts across transactions. Two handler
    /// runs that stage for one key at the same moment may commit in the other
    /// order, and a dead message that an operator retries goes after the later
    /// ones already sent; where that matters, process one key's deliveries one at a
    /// time (a single worker, or a [`VersionGuard`](crate::VersionGuard) check).
    pub fn with_ordering_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }

    /// Adds a header the sink passes on (the HTTP sink sends it with the request).
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push(name, value);
        self
    }

    /// Returns the sink's name.
    pub fn sink(&self) -> &str {
        &self.sink
    }

    /// Returns the ordering key, if any.
    pub fn ordering_key(&self) -> Option<&str> {
        self.ordering_key.as_deref()
    }

    /// Returns the payload.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// Returns the headers.
    pub fn headers(&self) -> &KeptHeaders {
        &self.headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_depend_on_the_delivery_the_handler_and_the_position_only() {
        let key = DedupeKey::new("billing", "stripe", "evt_1");
        let id = MessageId::derive(&key, "receipts", 0);
        assert_eq!(id, MessageId::derive(&key.clone(), "receipts", 0));
        assert_eq!(id.as_str().len(), 32);
        assert!(id.as_str().bytes().all(|b| HEX.contains(&b)));
        assert_ne!(id, MessageId::derive(&key, "receipts", 1));
        assert_ne!(id, MessageId::derive(&key, "invoices", 0));
        let tenant = key.clone().with_tenant("shop-1");
        assert_ne!(id, MessageId::derive(&tenant, "receipts", 0));
        // length prefixes: moving a character between parts changes the id
        let a = DedupeKey::new("ab", "c", "d");
        let b = DedupeKey::new("a", "bc", "d");
        assert_ne!(MessageId::derive(&a, "h", 0), MessageId::derive(&b, "h", 0));
    }

    #[test]
    fn a_json_message_says_so_in_its_headers() {
        let message = Message::json("email", &serde_json::json!({"to": "a@example.com"}))
            .unwrap()
            .with_ordering_key("cus_1");
        assert_eq!(message.sink(), "email");
        assert_eq!(message.ordering_key(), Some("cus_1"));
        assert_eq!(&message.payload()[..], br#"{"to":"a@example.com"}"#);
        assert_eq!(
            message.headers().get("content-type").unwrap(),
            "application/json"
        );
    }
}
