//! The outbox: side effects that leave the database, staged in the claim's
//! transaction and relayed afterwards.
//!
//! An email or a call to another company's API cannot join a database transaction.
//! Calling it from a handler sends twice when the transaction rolls back after the
//! call, or never when the process dies between the commit and the call. The outbox
//! turns such an effect into a row: [`Outbox::stage`] inserts a [`Message`] on the
//! handler's connection, so it commits with the claim and the handler's writes or
//! not at all, and a relay (`hookbox-outbox`) sends committed messages afterwards,
//! outside any transaction, until the sink accepts them.
//!
//! Each message has a [`MessageId`] derived from the delivery's dedupe key, the
//! handler's name and the message's position in that handler run. A handler retried
//! after a rollback, or a delivery an operator replays, stages the same ids again;
//! the UNIQUE constraint on the id keeps the first row, so nothing is sent twice
//! because it was staged twice. The relay passes the id to the sink, which hands it
//! to the downstream as its idempotency key: delivery to the sink is at least once,
//! and exactly once where the downstream honours the key.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;

use crate::inbox::AnyStoreError;
use crate::store::{BoxFuture, Store};
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
    sink: String,
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

/// A message with its id and origin, as a store inserts it
/// ([`OutboxStore::stage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedMessage {
    /// The derived id (the row's unique key).
    pub id: MessageId,
    /// The delivery the handler ran for.
    pub key: DedupeKey,
    /// The handler's name.
    pub handler: String,
    /// The message's position in that handler run, from 0.
    pub sequence: u32,
    /// The message.
    pub message: Message,
}

/// What [`OutboxStore::stage`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staged {
    /// Inserted now; it commits with the caller's transaction.
    New,
    /// A message with this id was staged before (a replayed delivery); the first one
    /// is kept as it was, sent or not.
    AlreadyStaged,
}

/// Stages messages for one handler run: each [`Outbox::stage`] call takes the next
/// position, so the ids depend only on the delivery, the handler's name and the
/// order of the calls.
///
/// Make one per handler run (`store.outbox(delivery.dedupe_key(), "receipts")`
/// inside the handler), never one shared across runs.
#[derive(Debug)]
pub struct Outbox<'s, S: ?Sized> {
    store: &'s S,
    key: DedupeKey,
    handler: String,
    next: u32,
}

impl<'s, S: OutboxStore + ?Sized> Outbox<'s, S> {
    /// Starts staging for `handler` running on the delivery `key`.
    pub fn new(store: &'s S, key: &DedupeKey, handler: impl Into<String>) -> Self {
        Self {
            store,
            key: key.clone(),
            handler: handler.into(),
            next: 0,
        }
    }

    /// Inserts `message` on `conn`, the handler's connection, inside its transaction;
    /// returns the message's id for your records.
    ///
    /// # Errors
    /// The database failed; return the error so the transaction rolls back.
    pub fn stage<'a>(
        &'a mut self,
        conn: &'a mut S::Conn,
        message: Message,
    ) -> BoxFuture<'a, Result<MessageId, S::Error>> {
        let sequence = self.next;
        self.next = self.next.saturating_add(1);
        let staged = StagedMessage {
            id: MessageId::derive(&self.key, &self.handler, sequence),
            key: self.key.clone(),
            handler: self.handler.clone(),
            sequence,
            message,
        };
        Box::pin(async move {
            let _outcome = self.store.stage(conn, &staged).await?;
            // counted at the insert: a message rolled back with its transaction is
            // counted too, as a staged attempt
            #[cfg(feature = "metrics")]
            if _outcome == Staged::New {
                metrics::counter!("hookbox_outbox_staged_total", "sink" => staged.message.sink.clone())
                    .increment(1);
            }
            Ok(staged.id)
        })
    }
}

/// A message row as a store keeps it: the message and the relay's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    /// The row's position in the outbox: staging order, the order the relay keeps
    /// per ordering key.
    pub seq: i64,
    /// The message's id, the downstream's idempotency key.
    pub id: MessageId,
    /// The delivery whose handler staged it.
    pub key: DedupeKey,
    /// The handler's name.
    pub handler: String,
    /// Its position in that handler run.
    pub sequence: u32,
    /// The sink's name.
    pub sink: String,
    /// The ordering key, if any.
    pub ordering_key: Option<String>,
    /// The payload.
    pub payload: Bytes,
    /// The headers for the sink.
    pub headers: KeptHeaders,
    /// When it was staged.
    pub staged_at: OffsetDateTime,
    /// Sends started so far, counted when a relay leases it (so a message whose send
    /// kills the relay still reaches the limit).
    pub attempts: u32,
    /// The last failure, as text.
    pub last_error: Option<String>,
    /// When a relay may take it next.
    pub next_attempt_at: OffsetDateTime,
    /// When the sink accepted it.
    pub sent_at: Option<OffsetDateTime>,
    /// When it became a dead letter.
    pub dead_at: Option<OffsetDateTime>,
}

impl OutboxMessage {
    /// Returns the state an operator reads: `pending`, `sent` or `dead`.
    pub fn state(&self) -> &'static str {
        if self.sent_at.is_some() {
            "sent"
        } else if self.dead_at.is_some() {
            "dead"
        } else {
            "pending"
        }
    }
}

/// A relay's hold on one message ([`OutboxStore::lease`]): only the holder of the
/// token may settle it, so a relay whose lease expired cannot overwrite the outcome
/// of the relay that took the message next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The message's row.
    pub seq: i64,
    /// The token the lease was taken with: random and never 0, so no settle with
    /// a made-up token matches a lease, and an unleased message matches none.
    pub token: i64,
}

/// A message a relay holds, with the lease to settle it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    /// The message, with `attempts` counting this send.
    pub message: OutboxMessage,
    /// The lease.
    pub lease: Lease,
}

/// How a relay settles a leased message ([`OutboxStore::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement<'a> {
    /// The sink accepted it.
    Sent,
    /// The send failed; try again at `at`.
    Retry {
        /// What failed, for `last_error`.
        error: &'a str,
        /// When the message is due again.
        at: OffsetDateTime,
    },
    /// The send failed for good, or reached the attempt limit.
    Dead {
        /// What failed, for `last_error`.
        error: &'a str,
    },
    /// Nothing was sent, for a reason that is not the message's (the relay has no
    /// sink of its name): due again at `at`, and this lease does not count as an
    /// attempt, so a message waiting for its sink never becomes a dead letter.
    Release {
        /// Why it was not sent, for `last_error`.
        error: &'a str,
        /// When the message is due again.
        at: OffsetDateTime,
    },
}

/// Which outbox messages an operator lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutboxFilter {
    /// Not sent and not dead, in staging order.
    #[default]
    Pending,
    /// Sent, the most recent first.
    Sent,
    /// Dead letters, the oldest first.
    Dead,
    /// Every message, the newest first.
    All,
}

/// Counts an operator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxStats {
    /// Messages not yet sent and not dead (the backlog).
    pub pending: u64,
    /// Sent messages kept until the retention purges them.
    pub sent: u64,
    /// Dead letters.
    pub dead: u64,
    /// When the oldest pending message was staged.
    pub oldest_pending: Option<OffsetDateTime>,
}

/// A store with an outbox table beside its claims.
///
/// # Guarantees
/// - [`OutboxStore::stage`] writes on the caller's connection only: the message
///   commits with the caller's transaction or not at all.
/// - A message is leased to one relay at a time; a lease ends when the relay settles
///   it or when it expires (the relay's process died).
/// - [`OutboxStore::lease`] never returns a message while an earlier message with
///   the same ordering key is neither sent nor dead.
/// - Sent messages are purged with the store's retention; pending and dead ones
///   never are.
pub trait OutboxStore: Store {
    /// Inserts `message` on `conn`, inside the caller's transaction; a message with
    /// the same id already there is kept and [`Staged::AlreadyStaged`] returned.
    ///
    /// # Errors
    /// The database failed; the caller's transaction should roll back.
    fn stage<'a>(
        &'a self,
        conn: &'a mut Self::Conn,
        message: &'a StagedMessage,
    ) -> BoxFuture<'a, Result<Staged, Self::Error>>;

    /// Starts staging for `handler` on the delivery `key` (see [`Outbox`]).
    fn outbox<'s>(&'s self, key: &DedupeKey, handler: impl Into<String>) -> Outbox<'s, Self>
    where
        Self: Sized,
    {
        Outbox::new(self, key, handler)
    }

    /// Leases up to `limit` due messages until `now + lease`, counting an attempt on
    /// each, in one short transaction. A message is due when it is neither sent nor
    /// dead, its `next_attempt_at` has come, no live lease holds it, and no earlier
    /// message with its ordering key is pending.
    ///
    /// # Errors
    /// The database failed; nothing was leased.
    fn lease(
        &self,
        limit: u32,
        lease: Duration,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<Leased>, Self::Error>>;

    /// Records how a leased message's send ended; `false` when the lease is no longer
    /// held (it expired and another relay took the message, or an operator retried
    /// it), in which case nothing changed.
    ///
    /// # Errors
    /// The database failed; the lease stays until it expires.
    fn settle<'a>(
        &'a self,
        lease: Lease,
        settlement: Settlement<'a>,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<bool, Self::Error>>;

    /// Records the outcomes of many leased messages, in one transaction where the
    /// store can (both database stores do); returns, in order, whether each lease
    /// was still held ([`OutboxStore::settle`]). The default settles them one by
    /// one.
    ///
    /// # Errors
    /// The database failed; the leases that were not recorded stay until they
    /// expire.
    fn settle_many<'a>(
        &'a self,
        settlements: &'a [(Lease, Settlement<'a>)],
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Vec<bool>, Self::Error>> {
        Box::pin(async move {
            let mut settled = Vec::with_capacity(settlements.len());
            for (lease, settlement) in settlements {
                settled.push(self.settle(*lease, *settlement, now).await?);
            }
            Ok(settled)
        })
    }

    /// Returns one message by id.
    ///
    /// # Errors
    /// The database failed.
    fn message<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, Self::Error>>;

    /// Returns up to `limit` messages that match `filter`, in the filter's order.
    ///
    /// # Errors
    /// The database failed.
    fn messages(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, Self::Error>>;

    /// Makes a dead or sent message due again with its attempts reset (the operator
    /// asks for a resend); `false` when there is no such message or it is pending.
    ///
    /// # Errors
    /// The database failed.
    fn retry_message<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, Self::Error>>;

    /// Makes every dead message due again; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn retry_dead_messages(&self) -> BoxFuture<'_, Result<u64, Self::Error>>;

    /// Returns the backlog, sent and dead counts.
    ///
    /// # Errors
    /// The database failed.
    fn outbox_stats(&self) -> BoxFuture<'_, Result<OutboxStats, Self::Error>>;

    /// Deletes sent messages whose `sent_at` is older than the retention of their
    /// delivery's provider, in bounded batches; returns how many. Pending and dead
    /// messages stay.
    ///
    /// # Errors
    /// The database failed; what was already deleted stays deleted.
    fn purge_sent(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, Self::Error>>;
}

// `Arc<S>` and `&S` are the outbox itself.
macro_rules! forward_outbox {
    ($($ty:ty),*) => {$(
        impl<S: OutboxStore> OutboxStore for $ty {
            fn stage<'a>(
                &'a self,
                conn: &'a mut Self::Conn,
                message: &'a StagedMessage,
            ) -> BoxFuture<'a, Result<Staged, Self::Error>> {
                (**self).stage(conn, message)
            }

            fn lease(
                &self,
                limit: u32,
                lease: Duration,
                now: OffsetDateTime,
            ) -> BoxFuture<'_, Result<Vec<Leased>, Self::Error>> {
                (**self).lease(limit, lease, now)
            }

            fn settle<'a>(
                &'a self,
                lease: Lease,
                settlement: Settlement<'a>,
                now: OffsetDateTime,
            ) -> BoxFuture<'a, Result<bool, Self::Error>> {
                (**self).settle(lease, settlement, now)
            }

            fn settle_many<'a>(
                &'a self,
                settlements: &'a [(Lease, Settlement<'a>)],
                now: OffsetDateTime,
            ) -> BoxFuture<'a, Result<Vec<bool>, Self::Error>> {
                (**self).settle_many(settlements, now)
            }

            fn message<'a>(
                &'a self,
                id: &'a MessageId,
            ) -> BoxFuture<'a, Result<Option<OutboxMessage>, Self::Error>> {
                (**self).message(id)
            }

            fn messages(
                &self,
                filter: OutboxFilter,
                limit: u32,
            ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, Self::Error>> {
                (**self).messages(filter, limit)
            }

            fn retry_message<'a>(
                &'a self,
                id: &'a MessageId,
            ) -> BoxFuture<'a, Result<bool, Self::Error>> {
                (**self).retry_message(id)
            }

            fn retry_dead_messages(&self) -> BoxFuture<'_, Result<u64, Self::Error>> {
                (**self).retry_dead_messages()
            }

            fn outbox_stats(&self) -> BoxFuture<'_, Result<OutboxStats, Self::Error>> {
                (**self).outbox_stats()
            }

            fn purge_sent(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, Self::Error>> {
                (**self).purge_sent(now)
            }
        }
    )*};
}

forward_outbox!(std::sync::Arc<S>, &S);

/// An operator's view of an outbox, usable as `&dyn OutboxAdmin` so one command
/// serves every backend. Implemented for every [`OutboxStore`].
pub trait OutboxAdmin: Send + Sync {
    /// Returns the backlog, sent and dead counts.
    ///
    /// # Errors
    /// The database failed.
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>>;

    /// Returns up to `limit` messages that match `filter`.
    ///
    /// # Errors
    /// The database failed.
    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>>;

    /// Returns one message by id.
    ///
    /// # Errors
    /// The database failed.
    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>>;

    /// Makes a dead or sent message due again; `false` when there is none or it is
    /// pending.
    ///
    /// # Errors
    /// The database failed.
    fn retry<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>>;

    /// Makes every dead message due again; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn retry_dead(&self) -> BoxFuture<'_, Result<u64, AnyStoreError>>;

    /// Deletes sent messages past their retention; returns how many.
    ///
    /// # Errors
    /// The database failed.
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>>;
}

impl<S: OutboxStore> OutboxAdmin for S {
    fn stats(&self) -> BoxFuture<'_, Result<OutboxStats, AnyStoreError>> {
        Box::pin(async move { self.outbox_stats().await.map_err(AnyStoreError::new) })
    }

    fn list(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<OutboxMessage>, AnyStoreError>> {
        Box::pin(async move {
            self.messages(filter, limit)
                .await
                .map_err(AnyStoreError::new)
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a MessageId,
    ) -> BoxFuture<'a, Result<Option<OutboxMessage>, AnyStoreError>> {
        Box::pin(async move { self.message(id).await.map_err(AnyStoreError::new) })
    }

    fn retry<'a>(&'a self, id: &'a MessageId) -> BoxFuture<'a, Result<bool, AnyStoreError>> {
        Box::pin(async move { self.retry_message(id).await.map_err(AnyStoreError::new) })
    }

    fn retry_dead(&self) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        Box::pin(async move { self.retry_dead_messages().await.map_err(AnyStoreError::new) })
    }

    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<u64, AnyStoreError>> {
        Box::pin(async move { self.purge_sent(now).await.map_err(AnyStoreError::new) })
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
